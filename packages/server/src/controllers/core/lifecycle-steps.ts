// The two ways an object with status winds down, shared by every controller: `spec.enabled: false`
// (DEACTIVATING -> DEACTIVATED) and DELETE (DELETING -> TERMINATED -> record removed). A controller whose
// runtime holds something for the object passes `release` (the sandbox controller removes the sandbox).
import { isGone } from '../../kinds/status.js';
import { keyOf, type StoredObject } from '../../store/store.js';
import { type ControllerDeps, transition } from './events.js';
import { DONE, type ReconcileResult } from './reconciler.js';

export interface WindDown {
  /** Frees what the runtime holds of the object; runs before the final status is written. */
  release?: () => Promise<void>;
  /** Message of the final event (DEACTIVATED or TERMINATED). */
  message?: string;
  /** Fields written with the final status; undefined deletes one (e.g. a sandbox's run state). */
  extras?: Record<string, unknown>;
  /** Called with the object once the final status is written (not when it already was). */
  done?: (o: StoredObject) => void;
}

const disabled = (o: StoredObject) => o.body.spec?.enabled === false;

/**
 * `spec.enabled: false`: DEACTIVATING -> (release) -> DEACTIVATED. The final step is written only while the
 * object is still disabled and DEACTIVATING, so a re-enable (a PUT) or a DELETE meanwhile wins.
 */
export async function deactivate(
  deps: ControllerDeps,
  o: StoredObject,
  steps: WindDown = {},
): Promise<StoredObject | undefined> {
  if (o.body.status === 'DEACTIVATED') return o;
  const d = await transition(deps, o, 'DEACTIVATING', 'deactivating: spec.enabled is false', disabled);
  if (!d) return undefined;
  await steps.release?.();
  const out = await deps.resources.updateStatus(keyOf(o), {
    to: 'DEACTIVATED',
    message: steps.message ?? 'deactivated',
    extras: steps.extras,
    when: (cur) => disabled(cur) && cur.body.status === 'DEACTIVATING',
  });
  if (out) steps.done?.(out);
  return out;
}

/** When the last TERMINATED event was written (retention counts from it). */
export function terminatedAtMs(o: StoredObject): number | undefined {
  const e = [...(o.body.events ?? [])].reverse().find((x: any) => x.status === 'TERMINATED');
  const t = Date.parse(e?.time ?? '');
  return Number.isFinite(t) ? t : undefined;
}

/**
 * DELETING -> (release) -> TERMINATED, then the record is removed once `retentionMs` has passed since
 * TERMINATED (at once by default; sandboxes keep theirs so a polling client sees TERMINATED, not a bare
 * 404). Call for an object that `isGone`; a server stopped half-way finishes the job at its next start.
 */
export async function finishDeletion(
  deps: ControllerDeps,
  o: StoredObject,
  steps: WindDown & { retentionMs?: number } = {},
): Promise<ReconcileResult> {
  if (!isGone(o)) return DONE;
  let t: StoredObject | undefined = o;
  if (o.body.status === 'DELETING') {
    await steps.release?.();
    t = await deps.resources.updateStatus(keyOf(o), {
      to: 'TERMINATED',
      message: steps.message ?? 'terminated: nothing left to release',
      extras: steps.extras,
      when: (cur) => cur.body.status === 'DELETING',
    });
    if (t) steps.done?.(t);
  }
  if (t?.body.status !== 'TERMINATED') return DONE;
  const nowMs = deps.now().getTime();
  const left = (terminatedAtMs(t) ?? nowMs) + (steps.retentionMs ?? 0) - nowMs;
  if (left > 0) return { requeueAfterMs: left };
  // At the version read: a write since (a new object created over this name) makes this throw, and the queue
  // retries with what is there then.
  await deps.resources.removeRecord(t);
  return DONE;
}
