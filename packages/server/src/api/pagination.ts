// Lists: `?limit=` (default 100, max 1000), opaque `?cursor=`, `?labels=k=v,...`; ordered by name.
// The page is answered in the shape the caller's API version asks for (api-version.ts): a bare array with the
// next cursor in headers, or `{data, meta}`.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Store, StoredObject } from '../store/store.js';
import { ApiError } from '../errors.js';
import { answerList } from './api-version.js';

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

const encodeKeyCursor = (key: string[]) =>
  Buffer.from(JSON.stringify({ afterKey: key })).toString('base64url');

function decodeKeyCursor(c: string): string[] {
  try {
    const v = JSON.parse(Buffer.from(c, 'base64url').toString('utf8'));
    if (Array.isArray(v?.afterKey) && v.afterKey.every((k: unknown) => typeof k === 'string'))
      return v.afterKey;
  } catch {}
  throw new ApiError('MALFORMED_REQUEST', 'cursor is not one this server issued', {
    errors: [{ pointer: '/query/cursor', message: 'invalid cursor' }],
  });
}

const compareKeys = (a: string[], b: string[]) => {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const c = (a[i] ?? '').localeCompare(b[i] ?? '');
    if (c) return c;
  }
  return 0;
};

/**
 * One page of a list gathered in memory (objects under every parent of a workspace, records across sandboxes),
 * ordered by `keyOf` (unique per item), ascending or `descending`; answered through `reply` in the caller's version.
 * The cursor holds the last key answered, so items added or removed meanwhile neither repeat nor shift a page.
 */
export function memoryPage<T>(
  items: T[],
  keyOf: (t: T) => string[],
  req: FastifyRequest,
  reply: FastifyReply,
  descending = false,
): T[] {
  const q = (req.query ?? {}) as Record<string, string>;
  const limit = parseLimit(q.limit);
  const order = (a: string[], b: string[]) => (descending ? -1 : 1) * compareKeys(a, b);
  const sorted = items.map((t) => ({ t, k: keyOf(t) })).sort((a, b) => order(a.k, b.k));
  const after = q.cursor ? decodeKeyCursor(q.cursor) : undefined;
  const rest = after ? sorted.filter((x) => order(x.k, after) > 0) : sorted;
  const page = rest.slice(0, limit);
  const more = rest.length > limit;
  answerList(req, reply, { nextCursor: more ? encodeKeyCursor(page[page.length - 1].k) : undefined });
  return page.map((x) => x.t);
}

/**
 * One page of a kind's objects under `parent`, answered (through `reply`) in the caller's version. `keep`, when
 * given, drops objects from the page (e.g. terminated sandboxes); pages are then refilled from the store, so a
 * page holds `limit` kept objects while there are more. `readOnly`: the caller changes none of the objects
 * (ListQuery.readOnly).
 */
export async function listPage(
  store: Store,
  kind: string,
  workspace: string,
  parent: string,
  req: FastifyRequest,
  reply: FastifyReply,
  keep?: (o: StoredObject) => boolean,
  readOnly = false,
) {
  const q = (req.query ?? {}) as Record<string, string>;
  const limit = parseLimit(q.limit);
  let after = q.cursor ? decodeCursor(q.cursor) : undefined;
  const labels = parseLabels(q.labels);
  const items: StoredObject[] = [];
  let more = false;
  for (;;) {
    const batch = await store.list({ kind, workspace, parent, after, limit: limit + 1, labels, readOnly });
    const full = batch.length > limit;
    for (const o of full ? batch.slice(0, limit) : batch) if (!keep || keep(o)) items.push(o);
    if (!full) break;
    after = batch[limit - 1].name;
    if (items.length >= limit) {
      more = true;
      break;
    }
  }
  if (items.length > limit) {
    items.length = limit;
    more = true;
  }
  // A refilled page may end before the store's batch did: the cursor is the last name answered.
  answerList(req, reply, { kind, nextCursor: more ? encodeCursor(items[items.length - 1].name) : undefined });
  return items;
}
