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

/** The dependants of one kind in one workspace to wake: every one, or those naming one of `names` per watch. */
interface PendingWake {
  kind: string;
  workspace: string;
  all: boolean;
  named: Map<Watch, Set<string>>;
}

/** Whether a dependant's list of names (as stored: not trusted to be a list) holds one of `changed`. */
const namesAny = (named: readonly string[] | undefined, changed: Set<string>) =>
  Array.isArray(named) && named.some((n) => changed.has(n));

export class ControllerManager {
  private readonly queue: WorkQueue;
  private unwatch?: () => void;
  private initial?: Promise<void>;
  /** Wakes gathered in this turn of the event loop, by kind and workspace: each is one list, however many changes. */
  private wakes = new Map<string, PendingWake>();
  private stopped = false;

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
    // Changed kind → the reconciled kinds that watch it (the first watch of it each declares), made once.
    const watchers = new Map<string, { kind: string; w: Watch | undefined }[]>();
    for (const [kind, r] of reconcilers) {
      const seen = new Set<string>();
      for (const w of r.watches ?? []) {
        const watched = typeof w === 'string' ? w : w.kind;
        if (seen.has(watched)) continue;
        seen.add(watched);
        watchers.set(watched, [
          ...(watchers.get(watched) ?? []),
          { kind, w: typeof w === 'string' ? undefined : w },
        ]);
      }
    }
    this.unwatch = resources.store.watch((c) => {
      if (reconcilers.has(c.object.kind)) this.queue.add(nameOf(c.object));
      for (const { kind, w } of watchers.get(c.object.kind) ?? [])
        this.wakeLater(kind, c.object.workspace, w, c.object.name);
    });
    this.initial = (async () => {
      for (const kind of reconcilers.keys())
        for (const o of await resources.store.list({ workspace: EVERY_WORKSPACE, kind }))
          this.queue.add(nameOf(o));
    })().catch((err) => this.deps.logger.error({ err }, 'listing objects to reconcile at start failed'));
  }

  /**
   * Queues, in the next turn, the objects of `kind` in `workspace` that depend on the changed object `changed` (one
   * of the kinds it watches): every one, or with a `Watch`, those naming it. The changes of one turn (a group commit
   * of a hundred policy writes) share one list per kind and workspace: a list per change was most of what a policy
   * write cost beyond its own statements (decision 066). The list runs after the changes, so it sees them.
   */
  private wakeLater(kind: string, workspace: string, w: Watch | undefined, changed: string) {
    const k = `${kind}${SEP}${workspace}`;
    let p = this.wakes.get(k);
    if (!p) {
      if (!this.wakes.size) setImmediate(() => this.wakeAll());
      p = { kind, workspace, all: false, named: new Map() };
      this.wakes.set(k, p);
    }
    if (!w) p.all = true;
    else {
      const names = p.named.get(w) ?? new Set<string>();
      p.named.set(w, names);
      names.add(changed);
    }
  }

  private async wakeAll() {
    const wakes = this.wakes;
    this.wakes = new Map();
    for (const p of wakes.values()) {
      if (this.stopped) return;
      try {
        for (const o of await this.deps.resources.store.list({ kind: p.kind, workspace: p.workspace }))
          if (p.all || [...p.named].some(([w, names]) => namesAny(w.names(o.body), names)))
            this.queue.add(nameOf(o));
      } catch (err) {
        this.deps.logger.warn(
          { err, kind: p.kind, workspace: p.workspace },
          'listing dependants of a change failed',
        );
      }
    }
  }

  /** Reconciles `key` now: something outside the store saw its runtime change (a sandbox's daemon refusing calls). */
  wake(key: ResourceKey): void {
    if (this.deps.reconcilers.has(key.kind)) this.queue.add(nameOf(key));
  }

  async stop(): Promise<void> {
    this.unwatch?.();
    this.stopped = true;
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
