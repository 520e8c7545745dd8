// Sandboxes: spec → a running sandbox in the runtime, status and run state back into the store.
//   DEPLOYING → (instances.start: the runtime starts it, /health answers) → DEPLOYED with state RUNNING; a start that fails is FAILED.
//   enabled: false → DEACTIVATING → (instances.remove) → DEACTIVATED; enabled again → DEPLOYING, a fresh sandbox.
//   DELETING → (instances.remove) → TERMINATED, kept as terminatedRetentionMs says, then the record goes.
// A sandbox the runtime still runs is adopted as it is after a server restart (same processes, frozen or not);
// a spec update that changes what runs (its envs) starts it again. One whose processes all died is started again,
// fresh, unless the out-of-memory killer ended them: then it is FAILED with the figures (outOfMemory). One whose
// start a killed server left unfinished (its daemon not reachable yet) is started again, fresh, whatever its status.
import { durationMs } from '../../kinds/rules.js';
import { expiresAtMs } from '../../kinds/sandbox.js';
import { isGone } from '../../kinds/status.js';
import { type SandboxEnd, type SandboxSpec, specHash, type VolumeMount } from '../../runtime/driver.js';
import { ImageError } from '../../runtime/images/errors.js';
import type { ImageStore } from '../../runtime/images/image-store.js';
import type { Instances, OwnerRegistration } from '../../runtime/instances.js';
import { sandboxId } from '../../runtime/sandbox-id.js';
import type { SnapshotLayers } from '../../runtime/snapshot-layers.js';
import {
  EVERY_WORKSPACE,
  FencedError,
  keyOf,
  type ResourceKey,
  type Store,
  type StoredObject,
} from '../../store/store.js';
import { type ControllerDeps, stillDeployingOf, transition } from '../core/events.js';
import { deactivate, finishDeletion } from '../core/lifecycle-steps.js';
import { DONE, type Reconciler, type ReconcileResult, TerminalError } from '../core/reconciler.js';
import { runsHere } from '../../cluster/placement.js';
import { stoppedMessage } from './sandbox-faults.js';
import {
  sandboxRuntimeSpec,
  unappliedRuntimeFields,
  unenforcedNote,
  type ImageSource,
  withImage,
  withImageNow,
} from './sandbox-spec.js';
import { attachVolumes, detachVolumes, holderName, VolumeNotReady } from '../volume/volume-attach.js';

/** Kept after its expiry ended it, so a client polling the sandbox sees TERMINATED rather than a bare 404. */
export const DEFAULT_TERMINATED_RETENTION = '5m';

/**
 * How long a TERMINATED sandbox keeps its record (decision 047): `lifecycle.terminatedRetention` when set; else
 * DEFAULT_TERMINATED_RETENTION for one its own expiry ended (its clients read TERMINATED after its time), and none
 * for one a DELETE ended before its time (the service's SDK reads 404 right after deleting, and the name is free).
 */
export function terminatedRetentionMs(body: any): number {
  const set = body.spec?.lifecycle?.terminatedRetention;
  if (set !== undefined) return durationMs(set) ?? 0;
  const events: { status?: string; time?: string }[] = body.events ?? [];
  const deleting = Date.parse([...events].reverse().find((e) => e.status === 'DELETING')?.time ?? '');
  const at = Number.isFinite(deleting) ? expiresAtMs(body, deleting) : undefined;
  return at !== undefined && at <= deleting ? (durationMs(DEFAULT_TERMINATED_RETENTION) ?? 0) : 0;
}
/** How often a live sandbox is looked at again, so one whose processes all died is started again. */
export const LIVE_RECHECK_MS = 30_000;
/** How often a sandbox waiting for its volume to be created looks again (a volume is made in ~50 ms). */
export const VOLUME_WAIT_MS = 200;

export interface SandboxControllerDeps extends ControllerDeps {
  /** Where sandboxes start and go (the runtime behind it: `instances.driver`). */
  instances: Instances;
  /** Where `spec.runtime.image` is resolved, in the sandbox's workspace, before the runtime gets its id. */
  images: ImageStore;
  /**
   * In a cluster, where a sandbox's image is had before it starts: the workspace's images are the leader's, copied
   * here when this node lacks them (runtime/images/peer-images.ts). Default: `images` alone.
   */
  imageSource?: ImageSource;
  /** Where the snapshot layers a restored, forked or archived sandbox stands on are (decision 053). */
  layers?: SnapshotLayers;
  /** Frees the workspace's snapshot layers nothing stands on any more (once a sandbox is TERMINATED). */
  collectLayers?: (workspace: string) => Promise<unknown>;
  /**
   * In a cluster, this server's node id: it reconciles only the sandboxes placed on it (cluster/placement.ts), and
   * removes an instance of one placed elsewhere (it was placed again while this node was cut off: fencing).
   */
  self?: string;
  /**
   * In a cluster, whether this node holds its lease (cluster/nodes.ts): while it does not, it starts, wakes and
   * writes nothing for its sandboxes; its reconciles are woken again once it has registered again (decision 064).
   */
  holding?: () => boolean;
}

const enabled = (o: StoredObject) => o.body.spec?.enabled !== false;

/** Milliseconds from the last DEPLOYING event (or the creation) to the DEPLOYED event just written. */
function deployMs(o: StoredObject): number | undefined {
  const events: { status?: string; time?: string }[] = o.body.events ?? [];
  const from =
    [...events].reverse().find((e) => e.status === 'DEPLOYING')?.time ?? o.body.metadata?.createdAt;
  const ms = Date.parse(events.at(-1)?.time ?? '') - Date.parse(from ?? '');
  return Number.isFinite(ms) ? ms : undefined;
}

/** Whether two reads of a sandbox stand on the same snapshot stack (decision 053). */
const sameStack = (a: StoredObject, b: StoredObject) =>
  JSON.stringify(a.body.rootLayers ?? []) === JSON.stringify(b.body.rootLayers ?? []) &&
  a.body.restoredFrom === b.body.restoredFrom;

export function sandboxReconciler(deps: SandboxControllerDeps): Reconciler {
  const { resources, instances, images, layers } = deps;
  const driver = instances.driver;
  /** The snapshot layers the object stands on, as the runtime takes them (host paths, topmost first). */
  const onLayers = (o: StoredObject, spec: SandboxSpec): SandboxSpec => {
    const ids: string[] = o.body.rootLayers ?? [];
    if (!ids.length) return spec;
    if (!layers) throw new TerminalError('the sandbox stands on snapshot layers and this server keeps none');
    try {
      return { ...spec, snapshotLayers: layers.paths(o.workspace, ids) };
    } catch (err) {
      throw new TerminalError(`the sandbox could not start: ${(err as Error).message}`);
    }
  };
  const owner = (o: StoredObject) =>
    ({ kind: 'Sandbox', workspace: o.workspace, name: o.name, role: 'sandbox' }) as const;
  /** One info line per lifecycle step: workspace and name only (the spec may hold secrets). */
  const log = (o: StoredObject, msg: string, extra: Record<string, unknown> = {}) =>
    deps.logger?.info({ workspace: o.workspace, name: o.name, ...extra }, msg);

  async function start(o: StoredObject, id: string, signal: AbortSignal): Promise<ReconcileResult> {
    if (o.body.status === 'DEPLOYED') {
      const d = await transition(deps, o, 'DEPLOYING', await stoppedMessage(driver, id), enabled);
      if (!d) return DONE;
    }
    let spec: SandboxSpec;
    try {
      // Before anything is claimed: a pull can take long, and an image that cannot be had fails here.
      spec = await withImage(
        deps.imageSource ?? images,
        o.workspace,
        onLayers(o, await sandboxRuntimeSpec(resources, o.workspace, o.body.spec)),
      );
    } catch (err) {
      if (!(err instanceof ImageError)) throw err;
      throw new TerminalError(`the sandbox could not start: ${err.message}`);
    }
    const holder = holderName('sandbox', o.name);
    let volumes: VolumeMount[];
    try {
      // Before anything starts: a sandbox never runs without the mounts its spec names.
      volumes = await attachVolumes(resources, driver, o.workspace, holder, o.body.spec?.volumes ?? []);
    } catch (err) {
      if (!(err instanceof VolumeNotReady)) throw err;
      await resources.recordEvent(keyOf(o), `waiting: ${err.message}`);
      return { requeueAfterMs: VOLUME_WAIT_MS };
    }
    try {
      await instances.start({ id, spec: { ...spec, volumes }, owner: owner(o), signal });
    } catch (err) {
      await detachVolumes(resources, o.workspace, holder);
      if (signal.aborted) throw err;
      throw new TerminalError(`the sandbox could not start: ${(err as Error).message}`);
    }
    // Only while still DEPLOYING and enabled: a DELETE or a deactivation that landed during a slow start wins,
    // and the reconcile its write queued releases the sandbox just started.
    const d = await resources.updateStatus(keyOf(o), {
      to: 'DEPLOYED',
      message: `deployed: sandbox running${unenforcedNote(o.body.spec)}`,
      extras: {
        state: 'RUNNING',
        lastUsedAt: deps.now().toISOString(),
        // Its TTL counts from the first time it ran (kinds/sandbox.ts expiresAtMs), not from each restart.
        readyAt: o.body.readyAt ?? deps.now().toISOString(),
      },
      // A restore that landed during this start (another stack) is not this start's to report: its reconcile follows.
      when: (cur) => stillDeployingOf(o)(cur) && sameStack(cur, o),
    });
    if (!d) return DONE;
    log(d, 'sandbox deployed', { ms: deployMs(d) });
    const unapplied = unappliedRuntimeFields(o.body.spec);
    if (unapplied) await resources.recordEvent(keyOf(o), unapplied);
    return { requeueAfterMs: LIVE_RECHECK_MS };
  }

  /**
   * A running sandbox ended by the out-of-memory killer is FAILED, not started again: by then the kernel had ended
   * every process of the user's (they go first, runtime/linux/launch.ts), so what held the memory was the
   * daemon or the files of the writable layer, and a fresh sandbox would silently lose those files (and, doing the
   * same again, end the same way). Its memory (the layer) and volumes are released; a spec update starts it again.
   */
  async function outOfMemory(o: StoredObject, id: string, end: SandboxEnd): Promise<ReconcileResult> {
    await instances.remove(id);
    await detachVolumes(resources, o.workspace, holderName('sandbox', o.name));
    const d = await resources.updateStatus(keyOf(o), {
      to: 'FAILED',
      message: outOfMemoryMessage(end),
      extras: { state: undefined },
      when: (cur) => cur.body.status === 'DEPLOYED',
    });
    if (d) log(d, 'sandbox ran out of memory', { oomKills: end.oomKills });
    return DONE;
  }

  /**
   * ARCHIVING → ARCHIVED (decision 053): what the sandbox wrote becomes a snapshot layer on top of its stack, recorded
   * before its instance goes (a crash in between captures again on the same stack: the same files), then its
   * instance and volumes are released and its memory with them. Name, URLs and previews are the object's: they stay.
   */
  async function archive(
    o: StoredObject,
    id: string,
    release: () => Promise<void>,
  ): Promise<ReconcileResult> {
    if (!layers) throw new TerminalError('this server keeps no snapshot layers: it cannot archive');
    const info = await driver.inspect(id);
    let stack: string[] = o.body.rootLayers ?? [];
    let top: string | undefined;
    if (info && info.state !== 'dead') {
      ({ layer: top, stack } = await layers.capture(driver, id, o.workspace, stack));
    }
    try {
      const d = await resources.updateStatus(keyOf(o), {
        message: 'archiving: files captured, stopping the sandbox',
        extras: { rootLayers: stack },
        when: (cur) => cur.body.status === 'ARCHIVING',
      });
      if (!d) return DONE; // deleted or unarchived meanwhile: its own reconcile follows
    } finally {
      layers.settle(top);
    }
    await release();
    const d = await resources.updateStatus(keyOf(o), {
      to: 'ARCHIVED',
      message: 'archived: files kept as a snapshot layer, processes stopped and memory freed',
      extras: { state: undefined },
      when: (cur) => cur.body.status === 'ARCHIVING',
    });
    if (d) log(d, 'sandbox archived', { layers: stack.length });
    return DONE;
  }

  return {
    async reconcile(key, signal): Promise<ReconcileResult> {
      try {
        return await reconcileHeld(key, signal);
      } catch (err) {
        if (!(err instanceof FencedError)) throw err;
        // Not a failure to retry: this node no longer holds the sandbox (decision 064).
        const id = sandboxId(key.workspace, key.name);
        if (err.lost === 'placement') {
          await instances.remove(id);
          deps.logger?.warn(
            { workspace: key.workspace, name: key.name },
            'a write about a sandbox now placed on another node was refused: its instance here removed',
          );
        } else
          deps.logger?.warn(
            { workspace: key.workspace, name: key.name },
            'a write about a sandbox was refused: this node has no lease; it takes the sandbox up again once registered again',
          );
        return DONE;
      }
    },
  };

  async function reconcileHeld(key: ResourceKey, signal: AbortSignal): Promise<ReconcileResult> {
    let o = await resources.store.get(key);
    if (!o) return DONE;
    const id = sandboxId(key.workspace, key.name);
    if (!runsHere(deps.self, o)) {
      // Another node's (or nobody's yet): nothing of it may run here. Its status, volumes and events are that
      // node's to write.
      if (await driver.inspect(id)) {
        await instances.remove(id);
        log(o, 'sandbox placed on another node: its instance here removed', { node: o.body.node });
      }
      return DONE;
    }
    // Without a lease this node acts for none of its sandboxes; it wakes them once registered again.
    if (deps.holding && !deps.holding()) return DONE;
    // The volumes are free for another holder only once no process of this sandbox can write them.
    const release = async () => {
      await instances.remove(id);
      await detachVolumes(resources, key.workspace, holderName('sandbox', key.name));
    };
    if (isGone(o))
      return finishDeletion(deps, o, {
        release,
        message: 'terminated: processes stopped and files released',
        extras: { state: undefined },
        retentionMs: terminatedRetentionMs(o.body),
        done: (t) => {
          log(t, 'sandbox terminated');
          if (t.body.rootLayers?.length)
            void deps
              .collectLayers?.(t.workspace)
              .catch((err) =>
                deps.logger?.warn({ err, workspace: t.workspace }, 'freeing snapshot layers failed'),
              );
        },
      });
    if (!enabled(o)) {
      await deactivate(deps, o, {
        release,
        message: 'deactivated: processes stopped and files released',
        extras: { state: undefined },
        done: (d) => log(d, 'sandbox deactivated'),
      });
      return DONE;
    }
    if (o.body.status === 'ARCHIVED') return DONE;
    if (o.body.status === 'ARCHIVING') return archive(o, id, release);
    if (o.body.status === 'UNARCHIVING') {
      o = await transition(deps, o, 'DEPLOYING', 'unarchiving: starting on its archived files', enabled);
      if (!o) return DONE;
      return start(o, id, signal);
    }
    // FAILED stays until the spec changes (a PUT moves it back to DEPLOYING).
    if (o.body.status === 'FAILED') {
      // Whatever it claimed is released (a start that failed after attaching, a restart mid-way).
      await detachVolumes(resources, key.workspace, holderName('sandbox', key.name));
      return DONE;
    }
    if (o.body.status === 'DEACTIVATED' || o.body.status === 'DEACTIVATING') {
      o = await transition(deps, o, 'DEPLOYING', 'enabled again', enabled);
      if (!o) return DONE;
    }
    const info = await driver.inspect(id);
    if (info?.state === 'dead' && info.ended?.oomKills && o.body.status === 'DEPLOYED')
      return outOfMemory(o, id, info.ended);
    // A start a killed server left unfinished (no daemon reachable, volumes missing) is made again, never adopted.
    if (info?.unfinished && info.state !== 'dead' && o.body.status !== 'DEPLOYED')
      await resources.recordEvent(keyOf(o), await stoppedMessage(driver, id));
    if (!info || info.state === 'dead' || info.unfinished) return start(o, id, signal);
    if (o.body.status !== 'DEPLOYED') {
      // Live already: a spec update, or a restart mid-way. New envs restart the sandbox, as the service does
      // (processes and files of the writable layer go; volumes stay); anything else keeps it as it is.
      const spec = onLayers(o, await sandboxRuntimeSpec(resources, o.workspace, o.body.spec));
      // What the name stands for in the workspace now (an image not had yet is a change: start pulls it).
      const now = withImageNow(images, o.workspace, spec);
      if (!now || info.specHash !== specHash(now)) return start(o, id, signal);
      // The egress policy applies at once, to running processes too (connections it no longer allows close).
      await driver.setEgress(id, spec.egress);
      const d = await resources.updateStatus(key, {
        to: 'DEPLOYED',
        message: `deployed: sandbox running (kept as it was)${unenforcedNote(o.body.spec)}`,
        extras: { state: info.state === 'frozen' ? 'STANDBY' : 'RUNNING' },
        when: stillDeployingOf(o),
      });
      if (d) log(d, 'sandbox deployed', { ms: deployMs(d), adopted: true });
    } else if (o.body.spec?.network) {
      // Records never hold routing secrets: after a restart the runtime has the policy without them until
      // this puts them back (a no-op when the runtime's policy is already this one).
      await driver.setEgress(id, (await sandboxRuntimeSpec(resources, o.workspace, o.body.spec)).egress);
    }
    return { requeueAfterMs: LIVE_RECHECK_MS };
  }
}

const mb = (bytes: number) => Math.round(bytes / (1024 * 1024));

/** The FAILED event of a sandbox the out-of-memory killer ended: what happened, with the figures, and what to do. */
export function outOfMemoryMessage(end: SandboxEnd): string {
  const files =
    end.diskUsedBytes === undefined
      ? ''
      : `; its files took ${mb(end.diskUsedBytes)} MB of it (what is written to /home/user, /tmp, /workspace, /var and /run/berth is held in memory)`;
  return (
    `out of memory: the sandbox used all of its ${mb(end.memoryLimitBytes)} MB and the kernel ended its processes ` +
    `(${end.oomKills} killed), the sandbox's API daemon with them${files}. Its processes and files are gone. ` +
    'To start it again, update its spec (it starts fresh, with the same memory), or create it anew with more ' +
    'memory (spec.runtime.memory)'
  );
}

/**
 * Sandboxes as the owner of their runtime instances (runtime/instances.ts): an instance is wanted while a Sandbox
 * object of its name exists in its workspace, whatever its status (its own reconcile releases it). One left by a
 * sandbox deleted while the server was down, or by a crash between removal and the record's deletion, is not; nor,
 * in a cluster (`self`), one placed on another node.
 */
export function sandboxOwner(store: Store, self?: string): OwnerRegistration {
  return {
    kinds: ['Sandbox'],
    // Sandbox ids are `<workspace>.<name>` or `h-<hash>` (runtime/sandbox-id.ts): no other owner's ids are.
    legacyRole: (id) => (id.includes('.') || id.startsWith('h-') ? 'sandbox' : undefined),
    async keep() {
      const objects = await store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' });
      // In a cluster, a node keeps only what the database places on it (one not placed yet is kept until it is):
      // a node back after its sandboxes were placed elsewhere removes its copies (fencing).
      return objects
        .filter((o) => o.body.node === undefined || runsHere(self, o))
        .map((o) => sandboxId(o.workspace, o.name));
    },
  };
}

/**
 * A node that holds a lease again (registered anew after its lease lapsed, or at its start; decision 064): re-reads
 * which sandboxes the database places on it now, removes its instances of every other one (placed elsewhere while
 * it was away, or deleted), and returns the keys of those placed on it, for their reconciles to take them up.
 */
export async function keepPlaced(
  store: Store,
  instances: Instances,
  self: string,
): Promise<{ placed: ResourceKey[]; removed: string[] }> {
  const objects = await store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' });
  const kept = new Set(
    objects
      .filter((o) => o.body.node === undefined || runsHere(self, o))
      .map((o) => sandboxId(o.workspace, o.name)),
  );
  const removed: string[] = [];
  for (const i of await instances.list()) {
    if (i.role !== 'sandbox' || kept.has(i.id)) continue;
    await instances.remove(i.id);
    removed.push(i.id);
  }
  return { placed: objects.filter((o) => runsHere(self, o)).map(keyOf), removed };
}
