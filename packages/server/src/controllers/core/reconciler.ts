// The contract between the controller manager and a per-kind reconciler (controller-runtime's Reconciler).
// A reconcile is level-triggered and idempotent: it re-reads the object by key, compares desired with
// actual, acts on the difference and writes status only when something changed.
import type { ResourceKey } from '../../store/store.js';
import type { QueueResult } from './queue.js';

/** `{done: true}`: nothing more to do until the object changes. `{requeueAfterMs}`: look again later. */
export type ReconcileResult = QueueResult;

export interface Reconciler {
  /** Throw to retry with backoff; throw `TerminalError` to record FAILED and stop retrying. */
  reconcile(key: ResourceKey, signal: AbortSignal): Promise<ReconcileResult>;
  /**
   * Other kinds this one's state depends on: a change to one of them re-runs the reconcile of every object
   * of this kind in the same workspace (a model whose connection was deleted must not wait for a timer).
   */
  watches?: string[];
}

/** A failure retrying cannot fix (bad spec, unknown region): recorded as a FAILED event, not retried. */
export class TerminalError extends Error {
  override name = 'TerminalError';
}

export const DONE: ReconcileResult = { done: true };
