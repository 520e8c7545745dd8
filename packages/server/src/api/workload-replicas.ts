// `replicas` of an agent or function as a read answers it: how many replicas run now (the active revision's and a
// canary's, standby ones included), from the replica set this server holds. Computed at each read, never stored: the
// number moves with traffic (scale to zero, scale out) without a write, so a watch does not carry its changes.
import type { ReplicaSet } from '../controllers/replicas.js';

export function replicaCount(replicas: Pick<ReplicaSet, 'get'>) {
  return (kind: string, workspace: string, view: Record<string, any>) => {
    const w = replicas.get(workspace, kind, view.metadata?.name);
    const all = [...(w?.replicas ?? []), ...(w?.canary?.w.replicas ?? [])];
    view.replicas = all.filter((r) => !r.gone).length;
  };
}
