// Sandboxes: spec → a running sandbox in the runtime, status and run state back into the store.
//   DEPLOYING → (driver.ensure, /health answers) → DEPLOYED with state RUNNING; a start that fails is FAILED.
//   enabled: false → DEACTIVATING → (driver.remove) → DEACTIVATED; enabled again → DEPLOYING, a fresh sandbox.
//   DELETING → (driver.remove) → TERMINATED, kept for lifecycle.terminatedRetention, then the record goes.
// A sandbox the runtime still runs is never touched: after a server restart it is adopted as it is (same
// processes, frozen or not); a spec update's envs apply to the processes started from then on.
import type { Logger } from 'pino';
import { durationMs } from '../kinds/rules.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { withEvent } from '../store/resources.js';
import { type ResourceKey, StoreError, type StoredObject } from '../store/store.js';
import { sandboxId } from '../runtime/sandbox-id.js';
import { type ControllerDeps, transition } from './events.js';
import { DONE, type Reconciler, type ReconcileResult, TerminalError } from './reconciler.js';
import { waitHealthy } from './sandbox-health.js';
import { runtimeSpecOf } from './sandbox-spec.js';

/** Kept after deletion so a client polling the sandbox sees TERMINATED rather than a bare 404. */
export const DEFAULT_TERMINATED_RETENTION = '5m';
/** How often a live sandbox is looked at again, so one whose processes all died is started again. */
export const LIVE_RECHECK_MS = 30_000;
/** Conflicting writers (the gateway records usage) make a guarded status write retry this often. */
const WRITE_ATTEMPTS = 5;

export interface SandboxControllerDeps extends ControllerDeps {
  driver: RuntimeDriver;
  logger?: Logger;
}

type Extras = Record<string, unknown>;

/**
 * Moves the object to `to` only while `when` holds for what the store holds now: a DELETE or a
 * deactivation that landed during a slow start must not be overwritten by that start's DEPLOYED.
 */
async function moveIf(
  deps: ControllerDeps,
  key: ResourceKey,
  when: (o: StoredObject) => boolean,
  to: string,
  message: string,
  extras: Extras = {},
): Promise<StoredObject | undefined> {
  const { store } = deps.resources;
  for (let i = 0; i < WRITE_ATTEMPTS; i++) {
    const cur = await store.get(key);
    if (!cur || !when(cur)) return undefined;
    const body = structuredClone(cur.body);
    for (const [k, v] of Object.entries(extras)) {
      if (v === undefined) delete body[k];
      else body[k] = v;
    }
    if (body.status !== to) withEvent(body, to, message, deps.now());
    try {
      return (await store.write([{ op: 'update', key, body, expectVersion: cur.resourceVersion }]))[0];
    } catch (e) {
      if (!(e instanceof StoreError && e.reason === 'conflict')) throw e;
    }
  }
  throw new Error(`too many concurrent writes to sandbox ${key.workspace}/${key.name}`);
}

const enabled = (o: StoredObject) => o.body.spec?.enabled !== false;
const statusIn =
  (...statuses: string[]) =>
  (o: StoredObject) =>
    statuses.includes(o.body.status);

function terminatedAtMs(o: StoredObject): number | undefined {
  const e = [...(o.body.events ?? [])].reverse().find((x: any) => x.status === 'TERMINATED');
  const t = Date.parse(e?.time ?? '');
  return Number.isFinite(t) ? t : undefined;
}

export function sandboxReconciler(deps: SandboxControllerDeps): Reconciler {
  const { resources, driver } = deps;

  async function finishDeletion(key: ResourceKey, id: string): Promise<ReconcileResult> {
    await driver.remove(id);
    const o = await moveIf(
      deps,
      key,
      statusIn('DELETING'),
      'TERMINATED',
      'terminated: processes stopped and files released',
      {
        state: undefined,
      },
    );
    return o ? expireRecord(o) : DONE;
  }

  async function expireRecord(o: StoredObject): Promise<ReconcileResult> {
    const retention =
      durationMs(o.body.spec?.lifecycle?.terminatedRetention ?? DEFAULT_TERMINATED_RETENTION) ?? 0;
    const left = (terminatedAtMs(o) ?? deps.now().getTime()) + retention - deps.now().getTime();
    if (left > 0) return { requeueAfterMs: left };
    // At the version read: a concurrent write (a new create over this name) makes this throw and retry.
    await resources.store.write([{ op: 'delete', key: o, expectVersion: o.resourceVersion }]);
    return DONE;
  }

  async function deactivate(o: StoredObject, id: string): Promise<ReconcileResult> {
    const d = await transition(deps, o, 'DEACTIVATING', 'deactivating: spec.enabled is false');
    await driver.remove(id);
    if (d)
      await moveIf(
        deps,
        o,
        (x) => !enabled(x) && x.body.status === 'DEACTIVATING',
        'DEACTIVATED',
        'deactivated: processes stopped and files released',
        { state: undefined },
      );
    return DONE;
  }

  async function start(o: StoredObject, id: string, signal: AbortSignal): Promise<ReconcileResult> {
    const why =
      o.body.status === 'DEPLOYED'
        ? 'the sandbox had stopped; starting it again'
        : o.body.status === 'DEACTIVATED' || o.body.status === 'DEACTIVATING'
          ? 'enabled again'
          : undefined;
    if (why) await transition(deps, o, 'DEPLOYING', why);
    try {
      const info = await driver.ensure(id, runtimeSpecOf(resources, o.body.spec));
      await waitHealthy(info.socketPath, signal);
    } catch (err) {
      await driver.remove(id).catch(() => undefined);
      if (signal.aborted) throw err;
      throw new TerminalError(`the sandbox could not start: ${(err as Error).message}`);
    }
    await moveIf(
      deps,
      o,
      (x) => enabled(x) && x.body.status === 'DEPLOYING',
      'DEPLOYED',
      'deployed: sandbox running',
      {
        state: 'RUNNING',
        lastUsedAt: deps.now().toISOString(),
      },
    );
    return { requeueAfterMs: LIVE_RECHECK_MS };
  }

  return {
    async reconcile(key, signal): Promise<ReconcileResult> {
      const o = await resources.store.get(key);
      if (!o) return DONE;
      const id = sandboxId(key.workspace, key.name);
      const status = o.body.status;
      if (status === 'DELETING') return finishDeletion(key, id);
      if (status === 'TERMINATED') return expireRecord(o);
      if (!enabled(o)) return status === 'DEACTIVATED' ? DONE : deactivate(o, id);
      // FAILED stays until the spec changes (a PUT moves it back to DEPLOYING).
      if (status === 'FAILED') return DONE;
      const info = await driver.inspect(id);
      if (!info || info.state === 'dead') return start(o, id, signal);
      if (status !== 'DEPLOYED') {
        // Live already: a spec update (or a restart mid-way) that needs no new sandbox. Envs are the one
        // runtime setting that applies live: to the processes started from now on.
        await driver.setEnvs(id, runtimeSpecOf(resources, o.body.spec).envs);
        const state = info.state === 'frozen' ? 'STANDBY' : 'RUNNING';
        await moveIf(
          deps,
          key,
          (x) => enabled(x) && x.body.status === 'DEPLOYING',
          'DEPLOYED',
          'deployed: sandbox running (kept as it was; envs apply to processes started from now on)',
          { state },
        );
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
    if (known.has(info.id)) continue;
    await deps.driver.remove(info.id);
    removed.push(info.id);
  }
  if (removed.length) deps.logger?.info({ sandboxes: removed }, 'removed sandboxes no object accounts for');
  return removed;
}
