// GET /v0/{agents|functions}/{name}/replicas: the replicas that serve the object now, each with its revision, its
// share (active or canary), requests in flight and last use. Read from the replica set, never from a replica
// (one in standby is named, not woken). The console charts the count over time from it.
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import type { Replica, ReplicaSet } from '../controllers/replicas.js';
import type { Resources } from '../store/resources.js';

export function registerWorkloadReplicaRoutes(
  app: FastifyInstance,
  deps: { resources: Resources; replicas: Pick<ReplicaSet, 'get'> },
) {
  for (const [plural, kind] of [
    ['agents', 'Agent'],
    ['functions', 'Function'],
  ] as const) {
    app.get(`/${plural}/:name/replicas`, async (req) => {
      const a = requireRole(req, 'viewer');
      const name = (req.params as { name: string }).name;
      await deps.resources.mustGet(deps.resources.kind(kind), a.workspace, [], name);
      const w = deps.replicas.get(a.workspace, kind, name);
      const of = (role: 'active' | 'canary', list: Replica[]) =>
        list
          .filter((r) => !r.gone)
          .map((r) => ({
            id: r.id,
            revision: r.revision,
            role,
            inflight: r.inflight,
            lastUsedAt: new Date(r.lastUsedMs).toISOString(),
          }));
      return [...of('active', w?.replicas ?? []), ...of('canary', w?.canary?.w.replicas ?? [])];
    });
  }
}
