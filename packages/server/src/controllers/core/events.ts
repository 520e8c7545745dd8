// Controllers' shorthands over the status verbs of `Resources` (`updateStatus`, `recordEvent`). Those write
// only when something would change, inside the store's transaction, so a reconcile that finds nothing to do
// writes nothing (and does not wake itself through the watch), and a concurrent writer never fails one.
import type { Logger } from 'pino';
import type { Status } from '../../kinds/status.js';
import type { Resources } from '../../store/resources.js';
import { FencedError, keyOf, type ResourceKey, type StoredObject } from '../../store/store.js';
import { recordHeld } from '../../cluster/fencing.js';

export interface ControllerDeps {
  resources: Resources;
  now: () => Date;
  logger?: Logger;
}

/** Steps that only lead into another status: asking for one when already past it is a no-op. */
const STEP_INTO: Partial<Record<Status, Status>> = { DEACTIVATING: 'DEACTIVATED', DELETING: 'TERMINATED' };

/**
 * Moves the object to `to` with an event unless it is already there or past it (for a step), and only while
 * `when` holds for the object as it is at the write. Returns the object (written or already there), or
 * undefined when the move did not happen (the object is gone, past the step, or `when` is false).
 */
export function transition(
  deps: ControllerDeps,
  o: ResourceKey,
  to: Status,
  message: string,
  when: (cur: StoredObject) => boolean = () => true,
): Promise<StoredObject | undefined> {
  return deps.resources.updateStatus(keyOf(o), {
    to,
    message,
    when: (cur) => STEP_INTO[to] !== cur.body.status && when(cur),
  });
}

/** DEPLOYED follows DEPLOYING only while the object is still enabled and DEPLOYING (no PUT or DELETE meanwhile). */
export const stillDeploying = (o: StoredObject) =>
  o.body.spec?.enabled !== false && o.body.status === 'DEPLOYING';

/**
 * As stillDeploying, and the spec is still the generation `o` had when the deploy began: a PUT that landed meanwhile
 * (its own DEPLOYING) is for the reconcile it queued to deploy, which a DEPLOYED written for the old spec would hide.
 */
export const stillDeployingOf = (o: StoredObject) => (cur: StoredObject) =>
  stillDeploying(cur) && cur.body.metadata?.generation === o.body.metadata?.generation;

/** Records FAILED with `message` (a terminal error): a status change, or a new reason while already FAILED. */
export async function recordFailure(deps: ControllerDeps, key: ResourceKey, message: string) {
  await deps.resources.recordEvent(key, message, 'FAILED');
}

/**
 * Records `message` as an event on the object of `w` (an agent or function), in the background: for the replica set,
 * which says there why a workload runs fewer replicas than it asks for (its workspace's quotas).
 */
export function workloadEvent(
  deps: Pick<ControllerDeps, 'resources' | 'logger'> & {
    /**
     * In a cluster, what a node writes as the holder of an agent's or function's replicas (decision 092): used when
     * this server does not lead (`resources`, the leader's, refused it), so a follower's replicas are reported too.
     */
    held?: Resources;
  },
) {
  return (w: { kind: string; workspace: string; name: string }, message: string) => {
    const key = { kind: w.kind, workspace: w.workspace, parent: '', name: w.name };
    void deps.resources
      .recordEvent(key, message)
      .then(
        () => undefined,
        (err) => {
          if (!deps.held || !(err instanceof FencedError) || err.lost !== 'lead') throw err;
          return recordHeld(deps.held, key, message);
        },
      )
      .catch((err) =>
        deps.logger?.warn({ err, workspace: w.workspace, name: w.name }, 'could not record an event'),
      );
  };
}
