// `?watch=true` on a kind's list or on one object: what the read would answer (ADDED lines, then one `SYNCED` line),
// then every later change, as lines of NDJSON (`{"type":"ADDED"|"MODIFIED"|"DELETED","object":{…}}`), until the client
// goes (or, watching one object, until it is removed). Same workspace, parents, role, label filter and redaction as
// the read it extends; the stream itself (ordering, credential checks, limits) is api/watch-stream.ts's.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Authenticator, atLeast } from '../auth/access.js';
import type { Role } from '../kinds/types.js';
import type { Change, Store, StoredObject } from '../store/store.js';
import { parseLabels } from './pagination.js';
import { startWatch, type WatchLimit } from './watch-stream.js';

export const WATCH_CONTENT_TYPE = 'application/x-ndjson';

/** PING keeps a quiet stream open; SYNCED follows the objects that were there when the watch began. */
export type WatchEventType = Change['type'] | 'PING' | 'SYNCED' | 'ERROR';

export interface WatchScope {
  store: Store;
  authenticator: Authenticator;
  limit: WatchLimit;
  kind: string;
  /** The least role that reads the kind: checked again with the credential before each change. */
  readRole: Role;
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

const line = (type: WatchEventType, extra: Record<string, unknown> = {}) =>
  `${JSON.stringify({ type, ...extra })}\n`;

/** Starts the stream for `req`; the caller returns what this returns. */
export async function watchAnswer(req: FastifyRequest, reply: FastifyReply, scope: WatchScope) {
  const { store, kind, workspace, parent, name } = scope;
  const labels = parseLabels(((req.query ?? {}) as Record<string, string>).labels);
  const route = { method: 'GET', path: req.url.split('?')[0] };
  const { out, close } = await startWatch(
    {
      store,
      workspace,
      follow: true,
      oneObject: name !== undefined,
      inScope: (o) =>
        o.kind === kind &&
        o.parent === parent &&
        (name === undefined || o.name === name) &&
        Object.entries(labels ?? {}).every(([k, v]) => o.body.metadata?.labels?.[k] === v),
      initial: async () =>
        name
          ? [await store.get({ kind, workspace, parent, name })].filter((o): o is StoredObject => !!o)
          : (await store.list({ kind, workspace, parent, labels })).filter(
              (o) => !scope.keep || scope.keep(o),
            ),
      stillAllowed: () =>
        scope.authenticator.resolve(req.headers, route).then(
          (a) => a.workspace === workspace && atLeast(a.role, scope.readRole),
          () => false,
        ),
      frames: {
        change: (type, o) => line(type, { object: scope.view(o) }),
        synced: () => line('SYNCED'),
        heartbeat: () => line('PING'),
        refused: (detail) => line('ERROR', { detail }),
      },
    },
    scope.limit,
  );
  req.raw.on('close', close);
  reply.type(WATCH_CONTENT_TYPE).header('cache-control', 'no-cache');
  return out;
}
