// Date-based API versions (docs/decisions/019-api-versions.md): a request's `Blaxel-Version: <YYYY-MM-DD>` header
// selects the newest version not later than that date; without it, the baseline. Every list answers through
// `answerList`, so a list added later takes the shape its caller's version asks for without any change of its own.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

/** The header the service's SDK sends on every request (docs/compat.md). */
export const VERSION_HEADER = 'blaxel-version';

/** Versions after the baseline, oldest first, each with what it changed (the docs list the same). */
export const API_VERSIONS = [
  {
    date: '2026-04-28',
    changes: 'lists answer `{data, meta: {hasMore, nextCursor}}` instead of a bare array',
  },
] as const;

export type ApiVersion = (typeof API_VERSIONS)[number]['date'] | 'baseline';

/** From this version on, a list is an envelope. */
export const LIST_ENVELOPE_SINCE = '2026-04-28';

/**
 * Lists the service itself keeps as bare arrays in every version, because its SDK maps the answer as an array:
 * a sandbox's previews and a preview's tokens.
 */
const BARE_IN_EVERY_VERSION = new Set(['Preview', 'PreviewToken']);

/** Whether a list of this kind stays a bare array in every version (the OpenAPI document says so too). */
export const bareInEveryVersion = (kind: string) => BARE_IN_EVERY_VERSION.has(kind);

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** The version a request asked for; a header that is not a calendar date is a 400 naming it. */
export function apiVersionOf(req: FastifyRequest): ApiVersion {
  const raw = req.headers[VERSION_HEADER];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || value.trim() === '') return 'baseline';
  const v = value.trim();
  const m = DATE.exec(v);
  if (
    !m ||
    Number.isNaN(Date.parse(`${v}T00:00:00Z`)) ||
    new Date(`${v}T00:00:00Z`).toISOString().slice(0, 10) !== v
  )
    throw new ApiError(
      'MALFORMED_REQUEST',
      `Blaxel-Version must be a date like ${LIST_ENVELOPE_SINCE}, got ${JSON.stringify(v)}`,
      {
        errors: [{ pointer: '/headers/blaxel-version', message: 'expected YYYY-MM-DD' }],
      },
    );
  // ISO dates compare as strings; a date past the newest version selects the newest.
  let chosen: ApiVersion = 'baseline';
  for (const ver of API_VERSIONS) if (ver.date <= v) chosen = ver.date;
  return chosen;
}

export interface ListPageInfo {
  /** Cursor of the next page; absent on the last page. */
  nextCursor?: string;
  /** The kind listed, when the list is of a kind (some lists stay bare in every version). */
  kind?: string;
}

/** Whether a list is answered as the bare array for the caller's version (and for a kind bare in every version). */
export function listIsBare(req: FastifyRequest, kind?: string): boolean {
  const version = apiVersionOf(req);
  return version === 'baseline' || version < LIST_ENVELOPE_SINCE || (!!kind && bareInEveryVersion(kind));
}

/**
 * Shapes the array a list handler returns for the caller's version: from LIST_ENVELOPE_SINCE on it is sent as
 * `{data, meta: {hasMore, nextCursor}}`; before, the bare array. The next cursor also rides in `X-Next-Cursor`
 * and `Link` in every version, so header-following clients (the CLI) work whichever version they send.
 */
export function answerList(req: FastifyRequest, reply: FastifyReply, info: ListPageInfo = {}): void {
  if (info.nextCursor) {
    const url = new URL(req.url, 'http://x');
    url.searchParams.set('cursor', info.nextCursor);
    reply.header('X-Next-Cursor', info.nextCursor);
    reply.header('Link', `<${url.pathname}${url.search}>; rel="next"`);
  }
  if (listIsBare(req, info.kind)) return;
  const meta = metaOf(info.nextCursor);
  // Only an array is wrapped: an error answered on this reply afterwards goes out as the problem it is (its
  // handler sets its own type). A custom serializer leaves the type unset, so it is set here. A string is a page's
  // text made already (listText).
  reply.type('application/json; charset=utf-8');
  reply.serializer((payload: unknown) =>
    typeof payload === 'string'
      ? payload
      : JSON.stringify(Array.isArray(payload) ? { data: payload, meta } : payload),
  );
}

const metaOf = (nextCursor: string | undefined) =>
  nextCursor ? { hasMore: true, nextCursor } : { hasMore: false };

/**
 * The text of a list page whose items are JSON texts already (kept GET answers), as answerList's shape for the
 * caller's version writes it: the bare array, or `{data, meta}` with the cursor the page set.
 */
export function listText(req: FastifyRequest, reply: FastifyReply, items: string[], kind?: string): string {
  const array = `[${items.join(',')}]`;
  if (listIsBare(req, kind)) return array;
  const next = reply.getHeader('X-Next-Cursor');
  return `{"data":${array},"meta":${JSON.stringify(metaOf(typeof next === 'string' ? next : undefined))}}`;
}
