// Controllers: reconcile loops that drive each kind's spec into the runtime and write status and events. The core
// holds the contract (reconciler.ts), the queue and the manager; each vertical (sandbox, workload, job, volume,
// config) registers its kinds' reconcilers here through `reconcilers` and `profiles` (main.ts).
import type { Logger } from 'pino';
import type { ControllerDeps } from './events.js';
import { awaitingRuntime, type ConfigProfile, configLifecycle } from './lifecycle.js';
import { ControllerManager } from './manager.js';
import type { QueueOptions } from './queue.js';
import type { Reconciler } from './reconciler.js';
import type { Resources } from '../../store/resources.js';
import type { ResourceKey } from '../../store/store.js';

export { TerminalError } from './reconciler.js';
export type { Reconciler, ReconcileResult } from './reconciler.js';

export interface ControllersDeps {
  resources: Resources;
  logger: Logger;
  now?: () => Date;
  /** The reconciler of each kind whose runtime exists, by kind. */
  reconcilers?: Record<string, (deps: ControllerDeps) => Reconciler>;
  /** Configuration-only kinds: what each checks before it counts as deployed (config/config-kinds.ts). */
  profiles?: Record<string, ConfigProfile>;
  queue?: QueueOptions;
  /** The kinds these controllers reconcile (default every kind with status): another set runs the others. */
  only?: (kind: string) => boolean;
}

/** Every kind with status gets a reconciler: its runtime's, a configuration lifecycle, or "awaiting a runtime". */
export function reconcilersFor(deps: ControllersDeps & ControllerDeps): Map<string, Reconciler> {
  const out = new Map<string, Reconciler>();
  for (const kd of deps.resources.kinds) {
    if (!kd.hasStatus || (deps.only && !deps.only(kd.kind))) continue;
    const make = deps.reconcilers?.[kd.kind];
    const profile = deps.profiles?.[kd.kind];
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
