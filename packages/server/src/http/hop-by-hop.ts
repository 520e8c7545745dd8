// Headers that describe one connection, not the message (RFC 9110 §7.6.1): no proxy passes them on, either way.
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
