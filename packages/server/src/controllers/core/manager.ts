// Turns store changes into names on the work queue and names into reconciles. At start it lists every
// object of every reconciled kind in every workspace, so a restart re-runs each reconcile and nothing
// depends on memory surviving a restart.
import type { Logger } from 'pino';
import type { ResourceKey } from '../../store/store.js';
import { type ControllerDeps, recordFailure } from './events.js';
import { type QueueOptions, WorkQueue } from './queue.js';
import { DONE, type Reconciler, TerminalError, type Watch } from './reconciler.js';
import { EVERY_WORKSPACE } from '../../store/store.js';

const SEP = '\u0000';
export const nameOf = (k: ResourceKey) => [k.kind, k.workspace, k.parent, k.name].join(SEP);
export function keyOfName(s: string): ResourceKey {
  const [kind, workspace, parent, name] = s.split(SEP);
  return { kind, workspace, parent, name };
}

export interface ManagerDeps extends ControllerDeps {
  logger: Logger;
  reconcilers: Map<string, Reconciler>;
  queue?: QueueOptions;
}

export class ControllerManager {
  private readonly queue: WorkQueue;
  private unwatch?: () => void;
  private initial?: Promise<void>;

  constructor(private readonly deps: ManagerDeps) {
    this.queue = new WorkQueue((name, signal) => this.handle(name, signal), {
      ...deps.queue,
      onError: (name, err, delayMs) =>
        deps.logger.warn(
          { err, object: keyOfName(name), retryInMs: delayMs },
          'reconcile failed; will retry',
        ),
    });
  }

  /** Watches first, then lists, so a change made during the listing is not missed. */
  start(): void {
    const { resources, reconcilers } = this.deps;
    this.unwatch = resources.store.watch((c) => {
      if (reconcilers.has(c.object.kind)) this.queue.add(nameOf(c.object));
      for (const [kind, r] of reconcilers) {
        const w = r.watches?.find((w) => (typeof w === 'string' ? w : w.kind) === c.object.kind);
        if (w)
          void this.wakeAll(kind, c.object.workspace, typeof w === 'string' ? undefined : w, c.object.name);
      }
    });
    this.initial = (async () => {
      for (const kind of reconcilers.keys())
        for (const o of await resources.store.list({ workspace: EVERY_WORKSPACE, kind }))
          this.queue.add(nameOf(o));
    })().catch((err) => this.deps.logger.error({ err }, 'listing objects to reconcile at start failed'));
  }

  /**
   * Queues the objects of `kind` in `workspace` that depend on the changed object `changed` (one of the kinds it
   * watches): every one, or with a `Watch`, those naming it.
   */
  private async wakeAll(kind: string, workspace: string, w: Watch | undefined, changed: string) {
    try {
      for (const o of await this.deps.resources.store.list({ kind, workspace }))
        if (!w || w.names(o.body)?.includes(changed)) this.queue.add(nameOf(o));
    } catch (err) {
      this.deps.logger.warn({ err, kind, workspace }, 'listing dependants of a change failed');
    }
  }

  /** Reconciles `key` now: something outside the store saw its runtime change (a sandbox's daemon refusing calls). */
  wake(key: ResourceKey): void {
    if (this.deps.reconcilers.has(key.kind)) this.queue.add(nameOf(key));
  }

  async stop(): Promise<void> {
    this.unwatch?.();
    await this.initial;
    await this.queue.stop();
  }

  private async handle(name: string, signal: AbortSignal) {
    const key = keyOfName(name);
    const r = this.deps.reconcilers.get(key.kind);
    if (!r) return DONE;
    try {
      return await r.reconcile(key, signal);
    } catch (err) {
      if (!(err instanceof TerminalError)) throw err;
      this.deps.logger.info({ object: key, reason: err.message }, 'reconcile failed for good');
      await recordFailure(this.deps, key, err.message);
      return DONE;
    }
  }
}
