// The generic reconcilers for kinds with nothing to run yet. Configuration-only kinds (VPC, egress
// gateway and IP) are deployed once their checks pass (config-kinds.ts); kinds
// whose runtime is not in this build stay DEPLOYING with one event saying so. Every kind with status
// winds down the same way (lifecycle-steps.ts).
import { isGone } from '../../kinds/status.js';
import { keyOf, type StoredObject } from '../../store/store.js';
import { type ControllerDeps, stillDeploying, transition } from './events.js';
import { deactivate, finishDeletion } from './lifecycle-steps.js';
import { DONE, type Reconciler, TerminalError } from './reconciler.js';

export const WAITING_FOR_RUNTIME = 'waiting for a runtime: not available in this build';

/** What a configuration-only kind checks before it counts as deployed, and what DEPLOYED says. */
export interface ConfigProfile {
  /** A problem no retry can fix (reported as FAILED), or undefined when the object is fine. */
  check?: (o: StoredObject, deps: ControllerDeps) => string | undefined;
  deployedMessage?: string | ((o: StoredObject, deps: ControllerDeps) => string);
}

function deployingMessage(status: string | undefined) {
  if (status === 'DEACTIVATED' || status === 'DEACTIVATING') return 'enabled again';
  if (status === 'FAILED') return 'the earlier problem is gone; deploying again';
  return 'deploying';
}

/**
 * enabled (default) -> DEPLOYING -> DEPLOYED, or FAILED when a check fails;
 * `spec.enabled: false` -> DEACTIVATING -> DEACTIVATED; DELETING -> TERMINATED -> removed.
 * Checks run on every reconcile, so a server restarted with different settings (e.g. fewer regions)
 * re-judges objects it deployed before.
 */
export function configLifecycle(deps: ControllerDeps, profile: ConfigProfile = {}): Reconciler {
  return {
    async reconcile(key) {
      const o = await deps.resources.store.get(key);
      if (!o) return DONE;
      if (isGone(o)) return finishDeletion(deps, o);
      if (o.body.spec?.enabled === false) {
        await deactivate(deps, o);
        return DONE;
      }
      const problem = profile.check?.(o, deps);
      if (problem) throw new TerminalError(problem);
      if (o.body.status === 'DEPLOYED') return DONE;
      const d = await transition(deps, o, 'DEPLOYING', deployingMessage(o.body.status));
      const m = profile.deployedMessage;
      const message = typeof m === 'function' ? m(o, deps) : (m ?? 'deployed');
      if (d) await transition(deps, d, 'DEPLOYED', message, stillDeploying);
      return DONE;
    },
  };
}

/**
 * For kinds whose runtime comes later: never DEPLOYED (nothing runs them). They stay DEPLOYING with one
 * event saying why, can be deactivated and enabled again, and are deleted like every other kind.
 */
export function awaitingRuntime(deps: ControllerDeps): Reconciler {
  return {
    async reconcile(key) {
      const o = await deps.resources.store.get(key);
      if (!o) return DONE;
      if (isGone(o)) return finishDeletion(deps, o);
      // Being off needs no runtime, so a disabled object can honestly be DEACTIVATED.
      if (o.body.spec?.enabled === false) {
        await deactivate(deps, o);
        return DONE;
      }
      // Other statuses (FAILED, BUILDING, ...) belong to a runtime: left as they are.
      const off = o.body.status === 'DEACTIVATED' || o.body.status === 'DEACTIVATING';
      const d = off ? await transition(deps, o, 'DEPLOYING', deployingMessage(o.body.status)) : o;
      if (d?.body.status === 'DEPLOYING') await deps.resources.recordEvent(keyOf(d), WAITING_FOR_RUNTIME);
      return DONE;
    },
  };
}
