// Status writes for controllers. A status change goes through `Resources.setStatus` (which appends the
// event); `appendEvent` records a fact without a status change (e.g. "waiting for a runtime").
// Both write only when something would change, so a reconcile that finds nothing to do writes nothing
// and does not wake itself up again through the watch.
import { withEvent } from '../store/resources.js';
import type { Resources } from '../store/resources.js';
import { keyOf, type ResourceKey, type StoredObject } from '../store/store.js';

export interface ControllerDeps {
  resources: Resources;
  now: () => Date;
}

const lastEvent = (o: StoredObject) =>
  (o.body.events ?? []).at(-1) as { status?: string; message?: string } | undefined;

/** Steps that only lead into another status: asking for one when already past it is a no-op. */
const STEP_INTO: Record<string, string> = { DEACTIVATING: 'DEACTIVATED', DELETING: 'TERMINATED' };

/** Moves `o` to `status` with an event, unless it is already there (or past it, for a step). */
export async function transition(deps: ControllerDeps, o: StoredObject, status: string, message: string) {
  if (o.body.status === status || STEP_INTO[status] === o.body.status) return o;
  return deps.resources.setStatus(keyOf(o), status, message);
}

/** `spec.enabled: false`: DEACTIVATING -> DEACTIVATED, and nothing once DEACTIVATED. */
export async function deactivate(deps: ControllerDeps, o: StoredObject, message = 'deactivated') {
  if (o.body.status === 'DEACTIVATED') return o;
  const d = await transition(deps, o, 'DEACTIVATING', 'deactivating: spec.enabled is false');
  return d && transition(deps, d, 'DEACTIVATED', message);
}

/**
 * Appends an event with the current status unless the last event already says the same thing.
 * Writes with the version read, so a concurrent writer makes this throw and the queue retries.
 */
export async function appendEvent(
  deps: ControllerDeps,
  o: StoredObject,
  message: string,
  status = o.body.status,
) {
  const last = lastEvent(o);
  if (last?.status === status && last?.message === message) return o;
  const body = withEvent(structuredClone(o.body), status, message, deps.now());
  const op = { op: 'update' as const, key: keyOf(o), body, expectVersion: o.resourceVersion };
  return (await deps.resources.store.write([op]))[0];
}

/** Records FAILED with `message` (a terminal error): a status change, or a new reason while already FAILED. */
export async function recordFailure(deps: ControllerDeps, key: ResourceKey, message: string) {
  const o = await deps.resources.store.get(key);
  if (!o || o.body.status === 'DELETING' || o.body.status === 'TERMINATED') return;
  if (o.body.status !== 'FAILED') await deps.resources.setStatus(key, 'FAILED', message);
  else await appendEvent(deps, o, message, 'FAILED');
}
