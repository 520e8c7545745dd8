// Volumes: spec → an image with a hard size cap in the runtime, status back into the store.
//   DEPLOYING → (driver.ensureVolume, seeded from its template version) → DEPLOYED; a failure is FAILED with why.
//   DELETING → (waits while a holder still has it) → driver.removeVolume → TERMINATED with terminatedAt, and the
//   record goes at once: the service's SDK reads 404 right after a delete (decision 047). Data is removed at
//   the TERMINATED step, never before (a DELETE of an attached volume is refused: kinds/volume.ts).
//   enabled: false → DEACTIVATED (data kept; not attachable); enabled again → DEPLOYED.
// Attaching and detaching belong to the holders' controllers (volume-attach.ts).
import { isGone } from '../../kinds/status.js';
import { templateNameOf } from '../../kinds/volume.js';
import type { RuntimeDriver } from '../../runtime/driver.js';
import { sweepArchives } from '../../runtime/volume-archives.js';
import { keyOf, type StoredObject, EVERY_WORKSPACE } from '../../store/store.js';
import { type ControllerDeps, stillDeploying, transition } from '../core/events.js';
import { capacityRefusal, spaceHolders, type VolumeCapacity } from './volume-capacity.js';
import { deactivate, finishDeletion } from '../core/lifecycle-steps.js';
import { DONE, type Reconciler, type ReconcileResult, TerminalError } from '../core/reconciler.js';

/** How often a volume deleted while still held looks again (its holder detaches when it is removed). */
export const HELD_RECHECK_MS = 1000;

export interface VolumeControllerDeps extends ControllerDeps {
  driver: RuntimeDriver;
  /** Where an uploaded template version's archive is, or undefined when it is not there. */
  archiveOf: (workspace: string, template: string, versionId: string) => string | undefined;
  /** Configured totals of volume space; none by default. */
  capacity?: VolumeCapacity;
  /** Reconciles drives instead (decision 031): the same images, no template, no single holder. */
  drives?: boolean;
  /**
   * In a cluster, this server's node: recorded on each volume it makes (its data stays on this node's disk, and what
   * mounts it is placed there: decision 102).
   */
  node?: string;
}

/** The archive a new volume is seeded from: `template` or `template:version` (latest by default). */
async function seedOf(deps: VolumeControllerDeps, o: StoredObject): Promise<string | undefined> {
  const ref: string | undefined = o.body.spec?.template;
  if (!ref) return undefined;
  const name = templateNameOf(ref)!;
  const wanted = ref.includes(':') ? ref.slice(ref.indexOf(':') + 1) : undefined;
  const t = await deps.resources.store.get({
    kind: 'VolumeTemplate',
    workspace: o.workspace,
    parent: '',
    name,
  });
  if (!t) throw new TerminalError(`volume template ${JSON.stringify(name)} does not exist`);
  const versions: { name: string; versionId: string }[] = t.body.versions ?? [];
  const version = wanted ? versions.find((v) => v.name === wanted) : versions.at(-1);
  if (!version)
    throw new TerminalError(
      wanted
        ? `version ${JSON.stringify(wanted)} of volume template ${JSON.stringify(name)} does not exist (deleted?)`
        : `volume template ${JSON.stringify(name)} has no version uploaded`,
    );
  const file = deps.archiveOf(o.workspace, name, version.versionId);
  if (!file)
    throw new TerminalError(
      `version ${JSON.stringify(version.name)} of volume template ${JSON.stringify(name)} has no content uploaded`,
    );
  return file;
}

export function volumeReconciler(deps: VolumeControllerDeps): Reconciler {
  const { resources, driver } = deps;
  /**
   * Capacity is judged and the image made one volume at a time (reconciles of different volumes run at once), so
   * two volumes racing for the last free space cannot both be made. A volume made before the limits were set (or
   * lowered) is kept: only new ones are judged.
   */
  let admitting: Promise<unknown> = Promise.resolve();
  /** Volumes made by this process whose DEPLOYED may not be written yet: they count already. */
  const made = new Set<string>();
  const keyName = (o: StoredObject) => `${o.kind}/${o.workspace}/${o.name}`;
  const what = deps.drives ? 'drive' : 'volume';
  function admitted(o: StoredObject, make: () => Promise<void>): Promise<void> {
    const cap = deps.capacity;
    if (cap?.totalMb === undefined && cap?.workspaceMb === undefined) return make();
    const turn = admitting.then(async () => {
      const all = await spaceHolders(resources.store);
      const refusal = capacityRefusal(
        cap,
        all,
        {
          kind: o.kind,
          workspace: o.workspace,
          name: o.name,
          sizeMb: o.body.spec.size,
        },
        (v) => made.has(keyName(v)),
      );
      if (refusal) throw new TerminalError(refusal);
      await make();
      made.add(keyName(o));
    });
    admitting = turn.catch(() => undefined);
    return turn;
  }
  return {
    async reconcile(key): Promise<ReconcileResult> {
      const o = await resources.store.get(key);
      if (!o) return DONE;
      const ref = { workspace: key.workspace, name: key.name, ...(deps.drives ? { drive: true } : {}) };
      if (isGone(o)) {
        const holder = o.body.state?.attachedTo;
        if (o.body.status === 'DELETING' && holder) {
          await resources.recordEvent(keyOf(o), `waiting for ${holder} to release the ${what}`);
          return { requeueAfterMs: HELD_RECHECK_MS };
        }
        return finishDeletion(deps, o, {
          release: () => driver.removeVolume(ref),
          message: 'terminated: data removed',
          extras: { terminatedAt: deps.now().toISOString() },
        });
      }
      if (o.body.spec?.enabled === false) {
        await deactivate(deps, o, { message: 'deactivated: data kept; not attachable until enabled again' });
        return DONE;
      }
      if (o.body.status === 'FAILED' || o.body.status === 'DEPLOYED') return DONE;
      const d = o.body.status === 'DEPLOYING' ? o : await transition(deps, o, 'DEPLOYING', 'enabled again');
      if (!d) return DONE;
      const size = d.body.spec.size;
      const seed = await seedOf(deps, d);
      await admitted(d, async () => {
        try {
          await driver.ensureVolume(ref, size, seed);
        } catch (e) {
          throw new TerminalError(`the ${what} could not be created: ${(e as Error).message}`);
        }
      });
      const from = seed ? ` from ${d.body.spec.template}` : '';
      await resources.updateStatus(keyOf(d), {
        to: 'DEPLOYED',
        message: `deployed: ${size} MB ${what} ready${from}${deps.node ? ` on node ${deps.node}` : ''}`,
        when: stillDeploying,
        ...(deps.node ? { extras: { node: deps.node } } : {}),
      });
      return DONE;
    },
  };
}

/** Removes template archives no version names (a deleted template's, a cut-short upload's). Run once at start. */
export async function removeOrphanArchives(deps: ControllerDeps & { dataDir: string }): Promise<string[]> {
  const templates = await deps.resources.store.list({ workspace: EVERY_WORKSPACE, kind: 'VolumeTemplate' });
  const byKey = new Map(
    templates.map((t) => [
      `${t.workspace}/${t.name}`,
      new Set<string>((t.body.versions ?? []).map((v: { versionId: string }) => v.versionId)),
    ]),
  );
  const removed = sweepArchives(deps.dataDir, (ws, t) => byKey.get(`${ws}/${t}`));
  if (removed.length) deps.logger?.info({ archives: removed }, 'removed template archives no version names');
  return removed;
}
