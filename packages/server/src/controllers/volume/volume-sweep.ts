// On each node of a cluster, the volumes whose data is on its disk and whose object is gone (decision 102). The
// controllers' leader deletes a volume's object once its data is removed where the leader runs; the data is on the
// node that made it, which may be another: that node removes it as it sees the deletion, or at its next start when
// it was away. Only a volume whose object no longer exists is removed: one whose object names another node (its
// name taken again meanwhile, or this node's id changed) is left as it is and logged, since removing data is final.
import type { Logger } from 'pino';
import type { RuntimeDriver, VolumeRef } from '../../runtime/driver.js';
import type { Store } from '../../store/store.js';

export interface VolumeSweepDeps {
  store: Store;
  driver: Pick<RuntimeDriver, 'volumesHere' | 'removeVolume'>;
  /** This node's id. */
  self: string;
  logger?: Logger;
}

const keyOf = (ref: VolumeRef) => ({ kind: 'Volume', workspace: ref.workspace, parent: '', name: ref.name });

/** One pass over the volumes on this disk; returns those removed. */
export async function sweepVolumes(deps: VolumeSweepDeps): Promise<VolumeRef[]> {
  const removed: VolumeRef[] = [];
  for (const ref of await deps.driver.volumesHere()) {
    const o = await deps.store.get(keyOf(ref));
    if (o) {
      if (typeof o.body.node === 'string' && o.body.node !== deps.self)
        deps.logger?.warn(
          { workspace: ref.workspace, volume: ref.name, node: o.body.node },
          'this disk holds data of a volume the cluster places on another node: left as it is',
        );
      continue;
    }
    await deps.driver.removeVolume(ref);
    removed.push(ref);
  }
  if (removed.length)
    deps.logger?.info({ volumes: removed }, "removed the data of deleted volumes from this node's disk");
  return removed;
}

/**
 * Sweeps once now, then removes the data of each volume made on this node as its deletion arrives. Returns the
 * unsubscribe function.
 */
export function followVolumeDeletions(deps: VolumeSweepDeps): () => void {
  const warn = (err: unknown) => deps.logger?.warn({ err }, "could not remove a deleted volume's data");
  void sweepVolumes(deps).catch(warn);
  return deps.store.watch((c) => {
    if (c.type !== 'DELETED' || c.object.kind !== 'Volume' || c.object.body.node !== deps.self) return;
    void deps.driver.removeVolume({ workspace: c.object.workspace, name: c.object.name }).catch(warn);
  });
}
