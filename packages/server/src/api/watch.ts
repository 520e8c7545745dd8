// GET /v0/watch: the workspace's objects and their changes as Server-Sent Events, for clients that show live state
// (the console) without polling every object. It rides the store's own watch: each committed change of a kind the
// caller may read, in the one workspace it acts in, is sent as the object reads through GET (secrets redacted).
//   event: ADDED | MODIFIED | DELETED    data: {"kind","parent","object"}   id: the store's sequence number of
//                                        the write (larger is newer; an object leaving what a list shows is DELETED)
//   event: SYNCED                        data: {"truncated"}: the initial objects are all sent (kinds that had more)
// Without `?follow=true` the answer is the initial objects and SYNCED, then it ends (a list in one request); with it
// the stream stays open and carries every later change. `?initial=false` leaves out the initial objects (a client
// that pages through a list with cursors, then applies changes newer than each row's resourceVersion).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Access, Authenticator } from '../auth/access.js';
import { atLeast } from '../auth/access.js';
import { requireRole } from '../auth/require-role.js';
import { ApiError } from '../errors.js';
import { isGone } from '../kinds/status.js';
import type { KindDescriptor } from '../kinds/types.js';
import type { Resources } from '../store/resources.js';
import type { Change, StoredObject } from '../store/store.js';

/** Initial objects sent per kind: the list's own maximum page; SYNCED names the kinds that had more. */
export const WATCH_INITIAL_MAX = 1000;
/** A comment line this often keeps proxies from closing an idle stream, and the credential is checked again. */
export const WATCH_HEARTBEAT_MS = 15_000;
/** Open follows per workspace: each holds a store watcher and a socket. */
export const WATCH_MAX_PER_WORKSPACE = 64;
/** A client that reads slower than changes come is cut off past this many unread bytes (it reconnects and lists). */
export const WATCH_MAX_BUFFERED = 4 * 1024 * 1024;

export interface WatchDeps {
  resources: Resources;
  kinds: KindDescriptor[];
  authenticator: Authenticator;
}

interface Query {
  kinds?: string;
  follow?: string;
  initial?: string;
}

/** The kinds a request watches: those it names (by plural) or every kind, each only if its role may read it. */
function selectKinds(all: KindDescriptor[], access: Access, named: string | undefined): KindDescriptor[] {
  const readable = (kd: KindDescriptor) => atLeast(access.role, kd.readRole ?? 'viewer');
  if (!named) return all.filter(readable);
  const out: KindDescriptor[] = [];
  for (const p of named.split(',').map((s) => s.trim().toLowerCase())) {
    if (!p) continue;
    const kd = all.find((k) => k.plural === p);
    if (!kd)
      throw new ApiError('VALIDATION_FAILED', `kinds: unknown kind ${JSON.stringify(p)}`, {
        errors: [{ pointer: '/kinds', message: `one of ${all.map((k) => k.plural).join(', ')}` }],
      });
    if (!readable(kd))
      throw new ApiError(
        'FORBIDDEN',
        `role ${access.role} in workspace ${access.workspace} cannot read ${kd.plural}`,
      );
    if (!out.includes(kd)) out.push(kd);
  }
  return out;
}

/** What a list leaves out (crud.ts): terminated records, and a child whose delete was accepted. */
const hidden = (kd: KindDescriptor, o: StoredObject) =>
  o.body.status === 'TERMINATED' || (!!kd.parents?.length && isGone(o));

function frame(event: string, data: unknown, id?: string) {
  return `${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function registerWatch(app: FastifyInstance, deps: WatchDeps) {
  const { resources } = deps;
  const open = new Map<string, number>();

  /** An object as GET shows it, or undefined for one a list would not show (being deleted, or terminated). */
  const eventOf = (kd: KindDescriptor, o: StoredObject, type: Change['type'], seq: number) => {
    const object = resources.view(kd, o);
    const gone = type === 'DELETED' || hidden(kd, o);
    return frame(gone ? 'DELETED' : type, { kind: kd.kind, parent: o.parent, object }, String(seq));
  };

  app.get('/watch', async (req: FastifyRequest, reply: FastifyReply) => {
    const access = requireRole(req, 'viewer');
    const q = (req.query ?? {}) as Query;
    const kinds = selectKinds(deps.kinds, access, q.kinds);
    const follow = q.follow === 'true';
    const initial = q.initial !== 'false';
    const ws = access.workspace;
    if (follow && (open.get(ws) ?? 0) >= WATCH_MAX_PER_WORKSPACE)
      throw new ApiError(
        'RATE_LIMITED',
        `workspace ${ws} already has ${WATCH_MAX_PER_WORKSPACE} watches open; close one first`,
        { headers: { 'retry-after': '5' } },
      );

    const byKind = new Map(kinds.map((k) => [k.kind, k]));
    const res = reply.raw;
    // Changes committed while the initial objects are read are queued, then sent after them (never lost).
    let queue: Change[] | undefined = [];
    let ended = false;
    const write = (text: string) => {
      if (ended) return;
      res.write(text);
      if (res.writableLength > WATCH_MAX_BUFFERED) end();
    };
    // Each change is sent once the credential is checked again (a cached lookup, dropped on any identity change):
    // a revoked key or a removed member sees nothing written after that, in commit order.
    let chain = Promise.resolve();
    const stillAllowed = () =>
      deps.authenticator.resolve(req.headers, { method: 'GET', path: '/v0/watch' }).then(
        (a) => a.workspace === ws && atLeast(a.role, 'viewer'),
        () => false,
      );
    const refuse = () => {
      write(frame('ERROR', { detail: 'the credential is no longer valid for this workspace' }));
      end();
    };
    const send = (c: Change) => {
      const kd = byKind.get(c.object.kind);
      if (!kd || c.object.workspace !== ws) return;
      const text = eventOf(kd, c.object, c.type, c.seq);
      chain = chain.then(async () => {
        if (ended) return;
        if (await stillAllowed()) write(text);
        else refuse();
      });
    };
    const unwatch = follow
      ? resources.store.watch((c) => {
          if (queue) queue.push(c);
          else send(c);
        })
      : () => undefined;
    let heartbeat: NodeJS.Timeout | undefined;
    const end = () => {
      if (ended) return;
      ended = true;
      unwatch();
      clearInterval(heartbeat);
      if (follow) {
        const n = (open.get(ws) ?? 1) - 1;
        if (n > 0) open.set(ws, n);
        else open.delete(ws);
      }
      res.end();
    };
    if (follow) open.set(ws, (open.get(ws) ?? 0) + 1);
    res.once('close', end);

    reply.hijack();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    try {
      const truncated: string[] = [];
      if (initial)
        for (const kd of kinds) {
          const list = await resources.store.list({
            kind: kd.kind,
            workspace: ws,
            limit: WATCH_INITIAL_MAX + 1,
          });
          if (list.length > WATCH_INITIAL_MAX) truncated.push(kd.plural);
          for (const o of list.slice(0, WATCH_INITIAL_MAX)) {
            if (!hidden(kd, o)) write(eventOf(kd, o, 'ADDED', o.resourceVersion));
          }
        }
      const pending = queue ?? [];
      queue = undefined;
      for (const c of pending) send(c);
      chain = chain.then(() => write(frame('SYNCED', { truncated })));
    } catch (err) {
      req.log.warn({ err }, 'watch: reading the initial objects failed');
      write(frame('ERROR', { detail: 'reading the objects failed; watch again' }));
      end();
      return;
    }
    if (!follow) {
      await chain;
      return end();
    }
    heartbeat = setInterval(() => {
      // With nothing written meanwhile, a revoked key still ends the stream at the next beat.
      chain = chain.then(async () => {
        if (ended) return;
        if (await stillAllowed()) write(': beat\n\n');
        else refuse();
      });
    }, WATCH_HEARTBEAT_MS);
    heartbeat.unref();
  });
}
