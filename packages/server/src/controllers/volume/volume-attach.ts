// Attaching volumes to a holder (a sandbox, a job's tasks, an agent's or function's replicas) and detaching them.
// One holder at a time: `state.attachedTo` is claimed for every volume of a spec in one store transaction, judged
// on each volume as it is at the write, so two sandboxes racing for one volume cannot both win, and a volume being
// deleted cannot be claimed (its DELETE refuses a held volume in its own transaction: kinds/volume.ts).
import { isGone } from '../../kinds/status.js';
import { type RuntimeDriver, type VolumeMount, VolumeMissingError } from '../../runtime/driver.js';
import type { Resources } from '../../store/resources.js';
import { keyOf, type ResourceKey, StoreError, type StoredObject } from '../../store/store.js';
import { TerminalError } from '../core/reconciler.js';

/** How a holder is named in `state.attachedTo` (and in the 409 a second holder gets). */
export const holderName = (kind: 'sandbox' | 'agent' | 'function' | 'job', name: string) => `${kind}:${name}`;

/** A volume the spec names exists but is not ready yet (still DEPLOYING): wait, do not fail. */
export class VolumeNotReady extends Error {
  override name = 'VolumeNotReady';
}

/**
 * A volume's data is on another node of the cluster (the one that made it, decision 102), and the holder runs where
 * the controllers' leader is: it waits for that node to lead again rather than fail for good.
 */
export class VolumeElsewhere extends VolumeNotReady {
  override name = 'VolumeElsewhere';
}

export interface SpecVolume {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}

const volumeKey = (workspace: string, name: string): ResourceKey => ({
  kind: 'Volume',
  workspace,
  parent: '',
  name,
});

/** Why `holder` may not take this volume now, or undefined when it may. */
export function attachRefusal(v: StoredObject, holder: string): string | undefined {
  const held = v.body.state?.attachedTo;
  if (held && held !== holder) return `volume ${JSON.stringify(v.name)} is attached to ${held}`;
  if (isGone(v)) return `volume ${JSON.stringify(v.name)} is being deleted`;
  if (v.body.status === 'FAILED' || v.body.status === 'DEACTIVATED' || v.body.status === 'DEACTIVATING')
    return `volume ${JSON.stringify(v.name)} is ${v.body.status}`;
  return undefined;
}

/**
 * Claims every volume of `mounts` for `holder` in one transaction and returns where each is mounted on the host.
 * Throws TerminalError (the holder is FAILED with the reason) when a volume is missing, held by someone else,
 * being deleted or failed; VolumeNotReady while one is still being created.
 */
export async function attachVolumes(
  resources: Resources,
  driver: RuntimeDriver,
  workspace: string,
  holder: string,
  mounts: SpecVolume[],
  /**
   * In a cluster, this node, when the holder runs wherever the controllers' leader is (an agent's or function's
   * replicas): a volume whose data is on another node is then VolumeElsewhere, a wait, instead of a failure.
   */
  leaderNode?: string,
): Promise<VolumeMount[]> {
  if (!mounts.length) return [];
  const names = [...new Set(mounts.map((m) => m.name))];
  const current = await Promise.all(names.map((n) => resources.store.get(volumeKey(workspace, n))));
  for (const [i, v] of current.entries()) {
    if (!v) throw new TerminalError(`volume ${JSON.stringify(names[i])} does not exist`);
    const refusal = attachRefusal(v, holder);
    if (refusal) throw new TerminalError(refusal);
    if (v.body.status !== 'DEPLOYED')
      throw new VolumeNotReady(`volume ${JSON.stringify(v.name)} is not ready yet`);
  }
  if (current.some((v) => v!.body.state?.attachedTo !== holder)) {
    // Every volume claimed in one transaction, each judged as it is at the write (a status verb: the holder is a
    // field only the server writes).
    const claims = names.map((n) => ({
      key: volumeKey(workspace, n),
      when: (cur: StoredObject) => {
        const refusal = attachRefusal(cur, holder);
        if (refusal) throw new TerminalError(refusal);
        return true;
      },
      extras: (cur: StoredObject) => ({ state: { ...cur.body.state, attachedTo: holder } }),
    }));
    try {
      await resources.updateStatuses(claims);
    } catch (e) {
      if (e instanceof StoreError && e.reason === 'not_found')
        throw new TerminalError(`volume ${JSON.stringify(e.key.name)} does not exist`);
      throw e;
    }
  }
  const byName = new Map(current.map((v) => [v!.name, v!]));
  const out: VolumeMount[] = [];
  for (const m of mounts) {
    const v = byName.get(m.name)!;
    let hostPath: string;
    try {
      // Mounted already, or again after a reboot; the size is the volume's own (immutable). Never made anew here:
      // a volume whose data is elsewhere would start empty as if nothing had been written to it.
      hostPath = await driver.ensureVolume({ workspace, name: m.name }, v.body.spec.size, undefined, false);
    } catch (e) {
      const made: unknown = v.body.node;
      if (e instanceof VolumeMissingError && typeof made === 'string' && leaderNode && made !== leaderNode)
        throw new VolumeElsewhere(
          `the data of volume ${JSON.stringify(m.name)} is on node ${made}, which made it, and this workload runs on the node leading the controllers (${leaderNode}): it starts once node ${made} leads them (drain node ${leaderNode} while node ${made} is up)`,
        );
      const where =
        e instanceof VolumeMissingError && typeof made === 'string'
          ? ` (it was made on node ${made}, whose disk holds it: what uses it runs there)`
          : '';
      throw new TerminalError(
        `volume ${JSON.stringify(m.name)} could not be mounted: ${(e as Error).message}${where}`,
      );
    }
    out.push({ hostPath, mountPath: m.mountPath, readOnly: m.readOnly === true });
  }
  return out;
}

/**
 * Releases every volume of `workspace` that `holder` holds (its sandbox is gone), but those named in `keep` (a
 * workload whose spec no longer names a volume lets that one go and keeps the rest); idempotent.
 */
export async function detachVolumes(
  resources: Resources,
  workspace: string,
  holder: string,
  keep: ReadonlySet<string> = new Set(),
): Promise<void> {
  const held = (await resources.store.list({ kind: 'Volume', workspace })).filter(
    (v) => v.body.state?.attachedTo === holder && !keep.has(v.name),
  );
  if (!held.length) return;
  try {
    await writeDetach(resources, held, holder);
  } catch (e) {
    // One was deleted meanwhile (its record removed): the others are released by listing again.
    if (e instanceof StoreError && e.reason === 'not_found')
      return detachVolumes(resources, workspace, holder, keep);
    throw e;
  }
}

async function writeDetach(resources: Resources, held: StoredObject[], holder: string) {
  await resources.updateStatuses(
    held.map((v) => ({
      key: keyOf(v),
      when: (cur: StoredObject) => cur.body.state?.attachedTo === holder,
      extras: (cur: StoredObject) => {
        const { attachedTo: _gone, ...state } = cur.body.state ?? {};
        return { state };
      },
    })),
  );
}
