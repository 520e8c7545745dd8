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
   * Other kinds this one's state depends on: a change to one of them re-runs the reconcile of the objects of
   * this kind in the same workspace that depend on it (a model whose connection was deleted must not wait for a
   * timer): every one for a bare kind, only those naming the changed object for a `Watch` with `names`.
   */
  watches?: (string | Watch)[];
}

export interface Watch {
  kind: string;
  /**
   * The names of objects of `kind` a dependant's stored body refers to. A change wakes only the dependants naming
   * it, so a write of one policy does not re-run the reconcile of every model in the workspace.
   */
  names: (body: any) => readonly string[] | undefined;
}

/** A dependency on the objects of `kind` named in the spec's list `field` (e.g. `spec.policies`). */
export const namedIn = (kind: string, field: string): Watch => ({
  kind,
  names: (body) => body?.spec?.[field],
});

/** A failure retrying cannot fix (bad spec, unknown region): recorded as a FAILED event, not retried. */
export class TerminalError extends Error {
  override name = 'TerminalError';
}

export const DONE: ReconcileResult = { done: true };
