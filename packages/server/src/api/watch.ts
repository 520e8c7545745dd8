// `?watch=true` on a kind's list or on one object: what the read would answer (ADDED lines, then one `SYNCED` line),
// then every later change, as lines of NDJSON (`{"type":"ADDED"|"MODIFIED"|"DELETED","object":{…}}`) from the store's
// own watch — the one every controller
// reacts to — until the client goes (or, watching one object, until it is removed). Same workspace, parents, role,
// label filter and redaction as the read it extends; nothing of another workspace is ever looked at.
import { PassThrough } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Change, Store, StoredObject } from '../store/store.js';
import { keyString } from '../store/store.js';
import { parseLabels } from './pagination.js';

/**
 * A `{"type":"PING"}` line this often on a quiet watch: proxies in front of Berth commonly cut a connection idle for
 * 30–60 s, and the client learns the server is still there.
 */
export const WATCH_PING_MS = 15_000;

export const WATCH_CONTENT_TYPE = 'application/x-ndjson';

/** PING keeps a quiet stream open; SYNCED follows the objects that were there when the watch began. */
export type WatchEventType = Change['type'] | 'PING' | 'SYNCED';

export interface WatchScope {
  store: Store;
  kind: string;
  workspace: string;
  /** Parent names joined by `/` (`''` for top-level kinds). */
  parent: string;
  /** One object; absent: the whole collection. */
  name?: string;
  /** The object as the client may see it (redacted unless secrets were asked for and allowed). */
  view: (o: StoredObject) => unknown;
  /** Which stored objects the list shows at the start (the read's own filter). */
  keep?: (o: StoredObject) => boolean;
}

/** Whether the request asks for a watch. */
export const wantsWatch = (req: FastifyRequest) =>
  ((req.query ?? {}) as Record<string, string>).watch === 'true';

/** Starts the stream for `req`; the caller returns what this returns (Fastify sends a stream as it is written). */
export async function watchAnswer(req: FastifyRequest, reply: FastifyReply, scope: WatchScope) {
  const { store, kind, workspace, parent, name } = scope;
  const labels = parseLabels(((req.query ?? {}) as Record<string, string>).labels);
  const inScope = (o: StoredObject) =>
    o.kind === kind &&
    o.workspace === workspace &&
    o.parent === parent &&
    (name === undefined || o.name === name) &&
    Object.entries(labels ?? {}).every(([k, v]) => o.body.metadata?.labels?.[k] === v);
  const out = new PassThrough();
  const line = (type: WatchEventType, o?: StoredObject) =>
    out.write(`${JSON.stringify(o ? { type, object: scope.view(o) } : { type })}\n`);
  // Subscribed before the read, so no change between the read and the first event is lost; changes seen meanwhile
  // wait, and those the read already shows (by the store's own version) are dropped.
  let held: Change[] | undefined = [];
  const shown = new Map<string, number>();
  let finished = false;
  const unwatch = store.watch((c) => {
    if (finished || !inScope(c.object)) return;
    if (held) held.push(c);
    else send(c);
  });
  const finish = () => {
    if (finished) return;
    finished = true;
    unwatch();
    clearInterval(ping);
    out.end();
  };
  const send = (c: Change) => {
    line(c.type, c.object);
    if (name !== undefined && c.type === 'DELETED') finish();
  };
  const ping = setInterval(() => line('PING'), WATCH_PING_MS);
  ping.unref();
  req.raw.on('close', finish);
  try {
    const initial = name
      ? [await store.get({ kind, workspace, parent, name })].filter((o): o is StoredObject => !!o)
      : (await store.list({ kind, workspace, parent, labels })).filter((o) => !scope.keep || scope.keep(o));
    for (const o of initial) {
      shown.set(keyString(o), o.resourceVersion);
      line('ADDED', o);
    }
    line('SYNCED');
    const waiting = held;
    held = undefined;
    for (const c of waiting)
      if (c.object.resourceVersion > (shown.get(keyString(c.object)) ?? 0) || c.type === 'DELETED') send(c);
  } catch (err) {
    finish();
    throw err;
  }
  reply.type(WATCH_CONTENT_TYPE).header('cache-control', 'no-cache');
  return out;
}
