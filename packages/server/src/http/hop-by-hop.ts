// Headers that describe one connection, not the message (RFC 9110 §7.6.1): no proxy passes them on, either way, nor
// the headers a message's `Connection` names (a sender marks its own hop-by-hop headers that way).
// The in-sandbox daemon keeps its own copy (sandbox-api/ is a program of its own, built into one file).
import type { IncomingMessage } from 'node:http';

export const HOP_BY_HOP: readonly string[] = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];

/** Whether a request carries a body to pass on (a relay gives undici none otherwise, so it sends no length). */
export const hasBody = (req: IncomingMessage) =>
  req.headers['content-length'] !== undefined
    ? req.headers['content-length'] !== '0'
    : req.headers['transfer-encoding'] !== undefined;

/** The header names a `Connection` header lists (lower case), which a proxy drops with it (RFC 9110 §7.6.1). */
export function connectionNamed(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const out: string[] = [];
  for (const v of Array.isArray(value) ? value : [value])
    for (const t of v.split(',')) {
      const name = t.trim().toLowerCase();
      if (name && name !== 'close' && name !== 'keep-alive') out.push(name);
    }
  return out;
}
