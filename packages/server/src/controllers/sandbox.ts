// Sandboxes: spec → a running sandbox in the runtime, status and run state back into the store.
//   DEPLOYING → (driver.ensure, /health answers) → DEPLOYED with state RUNNING; a start that fails is FAILED.
//   enabled: false → DEACTIVATING → (driver.remove) → DEACTIVATED; enabled again → DEPLOYING, a fresh sandbox.
//   DELETING → (driver.remove) → TERMINATED, kept for lifecycle.terminatedRetention, then the record goes.
// A sandbox the runtime still runs is never touched: after a server restart it is adopted as it is (same
// processes, frozen or not); a spec update's envs apply to the processes started from then on.
import { TASK_ID_PREFIX } from './job-task.js';
import { durationMs } from '../kinds/rules.js';
import { isGone } from '../kinds/status.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { sandboxId } from '../runtime/sandbox-id.js';
import { keyOf, type StoredObject } from '../store/store.js';
import { type ControllerDeps, stillDeploying, transition } from './events.js';
import { deactivate, finishDeletion } from './lifecycle-steps.js';
import { DONE, type Reconciler, type ReconcileResult, TerminalError } from './reconciler.js';
import { waitHealthy } from './sandbox-health.js';
import { runtimeSpecOf } from './sandbox-spec.js';

/** Kept after deletion so a client polling the sandbox sees TERMINATED rather than a bare 404. */
export const DEFAULT_TERMINATED_RETENTION = '5m';
/** How often a live sandbox is looked at again, so one whose processes all died is started again. */
export const LIVE_RECHECK_MS = 30_000;

export interface SandboxControllerDeps extends ControllerDeps {
  driver: RuntimeDriver;
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

export function sandboxReconciler(deps: SandboxControllerDeps): Reconciler {
  const { resources, driver } = deps;
  /** One info line per lifecycle step: workspace and name only (the spec may hold secrets). */
  const log = (o: StoredObject, msg: string, extra: Record<string, unknown> = {}) =>
    deps.logger?.info({ workspace: o.workspace, name: o.name, ...extra }, msg);

  async function start(o: StoredObject, id: string, signal: AbortSignal): Promise<ReconcileResult> {
    if (o.body.status === 'DEPLOYED') {
      const d = await transition(deps, o, 'DEPLOYING', 'the sandbox had stopped; starting it again', enabled);
      if (!d) return DONE;
    }
    try {
      const info = await driver.ensure(id, runtimeSpecOf(resources, o.body.spec));
      await waitHealthy(info.socketPath, signal);
    } catch (err) {
      await driver.remove(id).catch(() => undefined);
      if (signal.aborted) throw err;
      throw new TerminalError(`the sandbox could not start: ${(err as Error).message}`);
    }
    // Only while still DEPLOYING and enabled: a DELETE or a deactivation that landed during a slow start wins,
    // and the reconcile its write queued releases the sandbox just started.
    const d = await resources.updateStatus(keyOf(o), {
      to: 'DEPLOYED',
      message: 'deployed: sandbox running',
      extras: { state: 'RUNNING', lastUsedAt: deps.now().toISOString() },
      when: stillDeploying,
    });
    if (!d) return DONE;
    log(d, 'sandbox deployed', { ms: deployMs(d) });
    return { requeueAfterMs: LIVE_RECHECK_MS };
  }

  return {
    async reconcile(key, signal): Promise<ReconcileResult> {
      let o = await resources.store.get(key);
      if (!o) return DONE;
      const id = sandboxId(key.workspace, key.name);
      const release = () => driver.remove(id);
      if (isGone(o))
        return finishDeletion(deps, o, {
          release,
          message: 'terminated: processes stopped and files released',
          extras: { state: undefined },
          retentionMs:
            durationMs(o.body.spec?.lifecycle?.terminatedRetention ?? DEFAULT_TERMINATED_RETENTION) ?? 0,
          done: (t) => log(t, 'sandbox terminated'),
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
      // FAILED stays until the spec changes (a PUT moves it back to DEPLOYING).
      if (o.body.status === 'FAILED') return DONE;
      if (o.body.status === 'DEACTIVATED' || o.body.status === 'DEACTIVATING') {
        o = await transition(deps, o, 'DEPLOYING', 'enabled again', enabled);
        if (!o) return DONE;
      }
      const info = await driver.inspect(id);
      if (!info || info.state === 'dead') return start(o, id, signal);
      if (o.body.status !== 'DEPLOYED') {
        // Live already: a spec update (or a restart mid-way) that needs no new sandbox. Envs are the one
        // runtime setting that applies live: to the processes started from now on.
        await driver.setEnvs(id, runtimeSpecOf(resources, o.body.spec).envs);
        const d = await resources.updateStatus(key, {
          to: 'DEPLOYED',
          message: 'deployed: sandbox running (kept as it was; envs apply to processes started from now on)',
          extras: { state: info.state === 'frozen' ? 'STANDBY' : 'RUNNING' },
          when: stillDeploying,
        });
        if (d) log(d, 'sandbox deployed', { ms: deployMs(d), adopted: true });
      }
      return { requeueAfterMs: LIVE_RECHECK_MS };
    },
  };
}

/**
 * Removes the runtime's sandboxes that no Sandbox object accounts for (deleted while the server was
 * down, or left by a crash between removal and the record's deletion). Run once at start.
 */
export async function removeOrphanSandboxes(deps: SandboxControllerDeps): Promise<string[]> {
  const known = new Set(
    (await deps.resources.store.list({ kind: 'Sandbox' })).map((o) => sandboxId(o.workspace, o.name)),
  );
  const removed: string[] = [];
  for (const info of await deps.driver.list()) {
    // Job task sandboxes are the job runner's: it re-adopts or removes them itself (controllers/job-runner.ts).
    if (known.has(info.id) || info.id.startsWith(TASK_ID_PREFIX)) continue;
    await deps.driver.remove(info.id);
    removed.push(info.id);
  }
  if (removed.length) deps.logger?.info({ sandboxes: removed }, 'removed sandboxes no object accounts for');
  return removed;
}
