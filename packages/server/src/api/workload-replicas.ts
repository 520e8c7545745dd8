// The replicas that serve an agent or function now, read from the replica set this server holds, never from a
// replica (one in standby is named, not woken): GET /v0/{agents|functions}/{name}/replicas lists them (the console
// charts the count over time from it), and `replicas` on a read counts them. Computed at each read, never stored:
// the number moves with traffic (scale to zero, scale out) without a write, so a watch does not carry its changes.
// A replica kept frozen at scale to zero (decision 090) is listed with `standbyUntil` and not counted: it serves
// nothing until a request wakes it, so the count says what scale to zero means.
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import type { PublishedReplica } from '../cluster/nodes.js';
import { keptInStandby } from '../controllers/workload/idle-standby.js';
import type { Replica, ReplicaSet } from '../controllers/workload/replicas.js';
import type { Resources } from '../store/resources.js';

type Replicas = Pick<ReplicaSet, 'get'>;

/** The live replicas of one object, the active revision's then a canary's. */
function live(replicas: Replicas, workspace: string, kind: string, name: string) {
  const w = replicas.get(workspace, kind, name);
  const of = (role: 'active' | 'canary', list: Replica[]) =>
    list.filter((r) => !r.gone).map((r) => ({ r, role }));
  return [...of('active', w?.replicas ?? []), ...of('canary', w?.canary?.w.replicas ?? [])];
}

/** One replica as listed: this server's, or another node's as its last heartbeat published it (decision 092). */
export interface ListedReplica extends PublishedReplica {
  /** The node running it, in a cluster. */
  node?: string;
}

/** In a cluster: the replicas of one workload on the other healthy nodes, as their last heartbeats said. */
export type Elsewhere = (kind: string, workspace: string, name: string) => ListedReplica[];

export interface ReplicaListDeps {
  replicas: Replicas;
  /** This node's id in a cluster (each replica listed names its node); undefined on one server. */
  self?: string;
  elsewhere?: Elsewhere;
}

/** This server's live replicas of one object as listed (and as its heartbeat publishes them). */
export function localReplicas(
  replicas: Replicas,
  workspace: string,
  kind: string,
  name: string,
): ListedReplica[] {
  return live(replicas, workspace, kind, name).map(({ r, role }) => ({
    id: r.id,
    revision: r.revision,
    role,
    inflight: r.inflight,
    lastUsedAt: new Date(r.lastUsedMs).toISOString(),
    ...(r.standby && keptInStandby(r) ? { standbyUntil: new Date(r.standby.untilMs).toISOString() } : {}),
  }));
}

/** Every replica of one object: this server's, then (in a cluster) the other nodes'. */
function allReplicas(deps: ReplicaListDeps, workspace: string, kind: string, name: string): ListedReplica[] {
  const here = localReplicas(deps.replicas, workspace, kind, name);
  if (deps.self === undefined) return here;
  return [
    ...here.map((r) => ({ ...r, node: deps.self })),
    ...(deps.elsewhere?.(kind, workspace, name) ?? []),
  ];
}

export function registerWorkloadReplicaRoutes(
  app: FastifyInstance,
  deps: ReplicaListDeps & { resources: Resources },
) {
  for (const [plural, kind] of [
    ['agents', 'Agent'],
    ['functions', 'Function'],
  ] as const) {
    app.get(`/${plural}/:name/replicas`, async (req) => {
      const a = requireRole(req, 'viewer');
      const name = (req.params as { name: string }).name;
      await deps.resources.mustGet(deps.resources.kind(kind), a.workspace, [], name);
      return allReplicas(deps, a.workspace, kind, name);
    });
  }
}

export function replicaCount(deps: ReplicaListDeps) {
  return (kind: string, workspace: string, view: Record<string, any>) => {
    view.replicas = allReplicas(deps, workspace, kind, view.metadata?.name).filter(
      (r) => r.standbyUntil === undefined,
    ).length;
  };
}
