// Lists: `?limit=` (default 100, max 1000), opaque `?cursor=`, `?labels=k=v,...`; ordered by name.
// The body stays a bare array (the SDK needs that for previews); the next cursor rides in headers.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Store } from '../store/store.js';
import { ApiError } from '../errors.js';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

const encodeCursor = (name: string) => Buffer.from(JSON.stringify({ after: name })).toString('base64url');

function decodeCursor(c: string): string {
  try {
    const v = JSON.parse(Buffer.from(c, 'base64url').toString('utf8'));
    if (typeof v?.after === 'string') return v.after;
  } catch {}
  throw new ApiError('MALFORMED_REQUEST', 'cursor is not one this server issued', {
    errors: [{ pointer: '/query/cursor', message: 'invalid cursor' }],
  });
}

export function parseLabels(s: string | undefined): Record<string, string> | undefined {
  if (!s) return undefined;
  const out: Record<string, string> = {};
  for (const part of s.split(',')) {
    const i = part.indexOf('=');
    if (i <= 0)
      throw new ApiError(
        'MALFORMED_REQUEST',
        `labels must be key=value pairs separated by commas, got ${JSON.stringify(part)}`,
        {
          errors: [{ pointer: '/query/labels', message: 'expected key=value' }],
        },
      );
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export function parseLimit(s: string | undefined) {
  if (s === undefined) return DEFAULT_LIMIT;
  const n = Number(s);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT)
    throw new ApiError('MALFORMED_REQUEST', `limit must be an integer from 1 to ${MAX_LIMIT}`, {
      errors: [{ pointer: '/query/limit', message: `must be 1..${MAX_LIMIT}` }],
    });
  return n;
}

export async function listPage(
  store: Store,
  kind: string,
  workspace: string,
  parent: string,
  req: FastifyRequest,
  reply: FastifyReply,
) {
  const q = (req.query ?? {}) as Record<string, string>;
  const limit = parseLimit(q.limit);
  const after = q.cursor ? decodeCursor(q.cursor) : undefined;
  const items = await store.list({
    kind,
    workspace,
    parent,
    after,
    limit: limit + 1,
    labels: parseLabels(q.labels),
  });
  if (items.length > limit) {
    items.length = limit;
    const cursor = encodeCursor(items[limit - 1].name);
    const url = new URL(req.url, 'http://x');
    url.searchParams.set('cursor', cursor);
    reply.header('X-Next-Cursor', cursor);
    reply.header('Link', `<${url.pathname}${url.search}>; rel="next"`);
  }
  return items;
}
