// GET /v0/watch: the workspace's objects and their changes as Server-Sent Events, for clients that show live state
// (the console) without polling every object: every kind the caller's role may read (or those `?kinds=` names) in
// one stream, each object as GET shows it (secrets redacted). The stream itself (ordering, credential checks,
// limits) is api/watch-stream.ts's, shared with `?watch=true` on one kind (api/list-watch.ts).
//   event: ADDED | MODIFIED | DELETED    data: {"kind","parent","object"}   id: the store's sequence number of
//                                        the write (larger is newer; an object leaving what a list shows is DELETED)
//   event: SYNCED                        data: {"truncated"}: the initial objects are all sent (kinds that had more)
// Without `?follow=true` the answer is the initial objects and SYNCED, then it ends (a list in one request); with it
// the stream stays open and carries every later change. `?initial=false` leaves out the initial objects (a client
// that pages through a list with cursors, then applies changes newer than each row's resourceVersion).
import type { FastifyInstance } from 'fastify';
import type { Access, Authenticator } from '../auth/access.js';
import { atLeast } from '../auth/access.js';
import { requireRole } from '../auth/require-role.js';
import { ApiError } from '../errors.js';
import { isGone } from '../kinds/status.js';
import type { KindDescriptor } from '../kinds/types.js';
import type { Resources } from '../store/resources.js';
import type { StoredObject } from '../store/store.js';
import { startWatch, type WatchLimit } from './watch-stream.js';

/** Initial objects sent per kind: the list's own maximum page; SYNCED names the kinds that had more. */
export const WATCH_INITIAL_MAX = 1000;

export interface WatchDeps {
  resources: Resources;
  kinds: KindDescriptor[];
  authenticator: Authenticator;
  limit: WatchLimit;
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

const frame = (event: string, data: unknown, id?: string) =>
  `${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

export function registerWatch(app: FastifyInstance, deps: WatchDeps) {
  const { resources } = deps;
  app.get('/watch', async (req, reply) => {
    const access = requireRole(req, 'viewer');
    const q = (req.query ?? {}) as Query;
    const kinds = selectKinds(deps.kinds, access, q.kinds);
    const byKind = new Map(kinds.map((k) => [k.kind, k]));
    const ws = access.workspace;
    const truncated: string[] = [];
    const { out, close } = await startWatch(
      {
        store: resources.store,
        workspace: ws,
        follow: q.follow === 'true',
        inScope: (o) => byKind.has(o.kind),
        initial: async () => {
          if (q.initial === 'false') return [];
          const all: StoredObject[] = [];
          for (const kd of kinds) {
            const list = await resources.store.list({
              kind: kd.kind,
              workspace: ws,
              limit: WATCH_INITIAL_MAX + 1,
            });
            if (list.length > WATCH_INITIAL_MAX) truncated.push(kd.plural);
            all.push(...list.slice(0, WATCH_INITIAL_MAX).filter((o) => !hidden(kd, o)));
          }
          return all;
        },
        stillAllowed: () =>
          deps.authenticator.resolve(req.headers, { method: 'GET', path: '/v0/watch' }).then(
            (a) => a.workspace === ws && atLeast(a.role, 'viewer'),
            () => false,
          ),
        frames: {
          change: (type, o, seq) => {
            const kd = byKind.get(o.kind) as KindDescriptor;
            const gone = type === 'DELETED' || hidden(kd, o);
            const data = { kind: kd.kind, parent: o.parent, object: resources.view(kd, o) };
            return frame(gone ? 'DELETED' : type, data, String(seq));
          },
          synced: () => frame('SYNCED', { truncated }),
          heartbeat: () => ': beat\n\n',
          refused: (detail) => frame('ERROR', { detail }),
        },
      },
      deps.limit,
    );
    req.raw.on('close', close);
    reply
      .type('text/event-stream; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-accel-buffering', 'no');
    return out;
  });
}
