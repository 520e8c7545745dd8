// Writes a sandbox's run state (RUNNING | STANDBY) and lastUsedAt to the store, off the request path: one writer
// per sandbox that coalesces changes and writes the current values when it runs, so a quick freeze-wake-freeze
// never leaves a stale state behind, and a busy sandbox does not turn into writes.
import type { Logger } from 'pino';
import type { Resources } from '../store/resources.js';
import type { RunView } from './activator.js';
import type { Target } from './targets.js';

/** lastUsedAt is written at most this often per sandbox: enough for idle TTLs counted in minutes. */
export const LAST_USED_WRITE_INTERVAL_MS = 5_000;
/** Delay of a run-state write after the change: long enough for the waking request to be answered first. */
export const STATE_WRITE_DELAY_MS = 100;

/** What the store holds for a sandbox, so only changes are written. */
export interface Written {
  readonly state?: string;
  readonly lastUsedMs: number;
  readonly writtenAtMs: number;
}

interface Writer {
  written: Written;
  running?: Promise<void>;
  dirty: boolean;
}

export interface UsageWriterDeps {
  resources: Resources;
  logger: Logger;
  /** The run state to write, read when the write runs. */
  run: (t: Target) => RunView;
  now?: () => number;
}

export class UsageWriter {
  private readonly writers = new WeakMap<Target, Writer>();
  private readonly running = new Set<Promise<void>>();
  private readonly now: () => number;

  constructor(private readonly deps: UsageWriterDeps) {
    this.now = deps.now ?? Date.now;
  }

  private writer(t: Target): Writer {
    let w = this.writers.get(t);
    if (!w) {
      w = {
        written: { state: t.loaded.storedState, lastUsedMs: t.loaded.lastUsedMs, writtenAtMs: 0 },
        dirty: false,
      };
      this.writers.set(t, w);
    }
    return w;
  }

  written(t: Target): Written {
    return this.writer(t).written;
  }

  /** Writes the run state and lastUsedAt when they differ from the store, STATE_WRITE_DELAY_MS from now. */
  record(t: Target): void {
    if (!t.recordsUsage) return;
    const w = this.writer(t);
    if (w.running) {
      w.dirty = true;
      return;
    }
    // Later, not now: a wake-up records RUNNING while its request is still on its way to the sandbox, and a
    // store write (and the reconcile it triggers) would delay that request.
    const p = new Promise<void>((r) => setTimeout(r, STATE_WRITE_DELAY_MS))
      .then(() => this.flush(t, w))
      .finally(() => {
        w.running = undefined;
        this.running.delete(p);
      });
    w.running = p;
    this.running.add(p);
  }

  private async flush(t: Target, w: Writer): Promise<void> {
    do {
      w.dirty = false;
      const run = this.deps.run(t);
      const state = run.frozen ? 'STANDBY' : 'RUNNING';
      const used = run.lastUsedMs;
      const extras: Record<string, string> = {};
      if (state !== w.written.state) extras.state = state;
      if (used > w.written.lastUsedMs) extras.lastUsedAt = new Date(used).toISOString();
      if (!Object.keys(extras).length || t.evicted) continue;
      try {
        await this.deps.resources.updateStatus(t.key, { extras });
        w.written = { state, lastUsedMs: used, writtenAtMs: this.now() };
      } catch (err) {
        this.deps.logger.warn({ err, sandbox: t.id }, 'recording sandbox usage failed');
        return;
      }
    } while (w.dirty);
  }

  /** Waits for the writes under way (shutdown). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}
