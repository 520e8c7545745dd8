// The work queue of object names: the only retry logic in Berth (client-go's workqueue in small).
// It holds names, not events: a name added many times before it runs is reconciled once, and a name
// is never reconciled by two workers at once. Failures back off per name; a global cap bounds work.

/** First retry delay: long enough to let a conflicting writer finish, short enough to feel instant. */
export const BACKOFF_BASE_MS = 100;
/** Retry delay ceiling: a broken object is retried twice a minute, without spinning the CPU. */
export const BACKOFF_MAX_MS = 30_000;
/** Reconciles in flight at once: they mostly await the store or a child process, and SQLite serialises writes. */
export const MAX_CONCURRENT_RECONCILES = 8;

export type QueueResult = { done: true } | { requeueAfterMs: number };
export type QueueHandler = (name: string, signal: AbortSignal) => Promise<QueueResult>;

export interface QueueOptions {
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Called when a handler throws; the name is retried after `delayMs`. */
  onError?: (name: string, err: unknown, delayMs: number) => void;
}

/** Delay before retry number `failures` (1-based): base·2^(failures−1), capped. */
export function backoffMs(failures: number, base = BACKOFF_BASE_MS, max = BACKOFF_MAX_MS): number {
  return Math.min(max, base * 2 ** Math.min(failures - 1, 30));
}

export class WorkQueue {
  /** Names waiting to run, in order; each at most once. */
  private readonly ready: string[] = [];
  /** Names that must run (again): waiting in `ready`, or added while running. */
  private readonly dirty = new Set<string>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly abort = new AbortController();
  private readonly concurrency: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private stopped = false;

  constructor(
    private readonly handler: QueueHandler,
    private readonly opts: QueueOptions = {},
  ) {
    this.concurrency = opts.concurrency ?? MAX_CONCURRENT_RECONCILES;
    this.baseDelayMs = opts.baseDelayMs ?? BACKOFF_BASE_MS;
    this.maxDelayMs = opts.maxDelayMs ?? BACKOFF_MAX_MS;
  }

  /** Schedules `name` now. A name already waiting is not added twice; a running one runs once more after. */
  add(name: string): void {
    if (this.stopped || this.dirty.has(name)) return;
    this.dirty.add(name);
    if (!this.running.has(name)) this.ready.push(name);
    this.pump();
  }

  /** Schedules `name` after `ms`; an earlier pending schedule for the same name wins. */
  addAfter(name: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(name);
      return;
    }
    const at = Date.now() + ms;
    const prev = this.timers.get(name);
    if (prev && prev.at <= at) return;
    if (prev) clearTimeout(prev.timer);
    const timer = setTimeout(() => {
      this.timers.delete(name);
      this.add(name);
    }, ms);
    timer.unref();
    this.timers.set(name, { at, timer });
  }

  /** Names waiting or running (for tests and metrics). */
  get depth(): number {
    return this.ready.length + this.running.size;
  }

  /** Stops taking work, cancels pending retries, aborts and awaits the reconciles in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
    this.ready.length = 0;
    this.dirty.clear();
    this.abort.abort();
    await Promise.allSettled([...this.running.values()]);
  }

  private pump() {
    while (!this.stopped && this.running.size < this.concurrency && this.ready.length) {
      const name = this.ready.shift()!;
      this.dirty.delete(name);
      this.running.set(name, this.run(name));
    }
  }

  private async run(name: string): Promise<void> {
    // Yield to the event loop first: `running` then holds this promise before the handler can finish,
    // and a reconciler that keeps rewriting its object burns CPU but cannot starve HTTP and timers
    // (the SQLite store answers synchronously, so such a loop would otherwise be all microtasks).
    await new Promise((r) => setImmediate(r));
    let retryAfter: number | undefined;
    try {
      const r = await this.handler(name, this.abort.signal);
      this.failures.delete(name);
      if ('requeueAfterMs' in r) retryAfter = r.requeueAfterMs;
    } catch (err) {
      const n = (this.failures.get(name) ?? 0) + 1;
      this.failures.set(name, n);
      retryAfter = backoffMs(n, this.baseDelayMs, this.maxDelayMs);
      if (!this.stopped) this.opts.onError?.(name, err, retryAfter);
    } finally {
      this.running.delete(name);
    }
    if (this.stopped) return;
    if (this.dirty.has(name)) this.ready.push(name);
    else if (retryAfter !== undefined) this.addAfter(name, retryAfter);
    this.pump();
  }
}
