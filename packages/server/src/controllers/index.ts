// Controllers: reconcile loops that drive each kind's spec into the runtime and write status and events.
// This file picks the reconciler of each kind; a kind's runtime plugs in through RUNTIME_RECONCILERS.
import type { Logger } from 'pino';
import type { Resources } from '../store/resources.js';
import type { ResourceKey } from '../store/store.js';
import { CONFIG_PROFILES } from './config-kinds.js';
import type { ControllerDeps } from './events.js';
import { awaitingRuntime, configLifecycle } from './lifecycle.js';
import { egressIpReconciler } from './egress-ip.js';
import { ControllerManager } from './manager.js';
import { modelReconciler } from './model.js';
import type { QueueOptions } from './queue.js';
import type { Reconciler } from './reconciler.js';

export { TerminalError } from './reconciler.js';
export type { Reconciler, ReconcileResult } from './reconciler.js';

/** Kinds whose runtime exists get their own reconciler here (e.g. `Sandbox: (d) => sandboxReconciler(d)`). */
export const RUNTIME_RECONCILERS: Record<string, (deps: ControllerDeps) => Reconciler> = {
  Model: (d) => modelReconciler(d),
  EgressIp: (d) => egressIpReconciler(d),
};

export interface ControllersDeps {
  resources: Resources;
  logger: Logger;
  now?: () => Date;
  /** Replace or add reconcilers by kind (later runtime issues, tests). */
  reconcilers?: Record<string, (deps: ControllerDeps) => Reconciler>;
  queue?: QueueOptions;
}

/** Every kind with status gets a reconciler: its runtime's, a configuration lifecycle, or "awaiting a runtime". */
export function reconcilersFor(deps: ControllersDeps & ControllerDeps): Map<string, Reconciler> {
  const custom = { ...RUNTIME_RECONCILERS, ...deps.reconcilers };
  const out = new Map<string, Reconciler>();
  for (const kd of deps.resources.kinds) {
    if (!kd.hasStatus) continue;
    const make = custom[kd.kind];
    const profile = CONFIG_PROFILES[kd.kind];
    out.set(kd.kind, make ? make(deps) : profile ? configLifecycle(deps, profile) : awaitingRuntime(deps));
  }
  return out;
}

export function startControllers(opts: ControllersDeps): {
  stop(): Promise<void>;
  wake(key: ResourceKey): void;
} {
  const deps = { ...opts, now: opts.now ?? (() => new Date()) };
  const manager = new ControllerManager({ ...deps, reconcilers: reconcilersFor(deps) });
  manager.start();
  return { stop: () => manager.stop(), wake: (key) => manager.wake(key) };
}
