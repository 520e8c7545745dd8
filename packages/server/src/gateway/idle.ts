// Standby: a sandbox with no request for `standbyAfterMs`, nothing in flight and no keepAlive process is
// frozen (memory and processes stay, CPU goes to zero). Also records the run state and lastUsedAt in the
// store, off the request path and at most every few seconds, so a busy sandbox does not turn into writes.
import type { Logger } from 'pino';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Resources } from '../store/resources.js';
import type { Activator } from './activator.js';
import type { Target } from './targets.js';

/** lastUsedAt is written at most this often per sandbox: enough for idle TTLs counted in minutes. */
export const LAST_USED_WRITE_INTERVAL_MS = 5_000;
/** Delay of a run-state write after the change: long enough for the waking request to be answered first. */
export const STATE_WRITE_DELAY_MS = 100;
/** How long the daemon may take to say whether a keepAlive process runs; no answer means no freeze. */
export const HEALTH_TIMEOUT_MS = 2_000;
/** Sweep period bounds: a quarter of the standby delay, so standby lands at most 25% late. */
const MIN_TICK_MS = 50;
const MAX_TICK_MS = 1_000;

export interface IdleDeps {
  resources: Resources;
  driver: RuntimeDriver;
  activator: Activator;
  logger: Logger;
  standbyAfterMs: number;
  /** False when the runtime has no freezer: usage is still recorded, nothing is ever frozen. */
  canFreeze: () => boolean;
  targets: () => Iterable<Target>;
  now?: () => number;
}

export class IdleSweeper {
  private timer?: NodeJS.Timeout;
  private readonly now: () => number;
  readonly tickMs: number;

  constructor(private readonly deps: IdleDeps) {
    this.now = deps.now ?? Date.now;
    this.tickMs = Math.min(MAX_TICK_MS, Math.max(MIN_TICK_MS, Math.floor(deps.standbyAfterMs / 4)));
  }

  start(): void {
    this.timer = setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  tick(): void {
    const now = this.now();
    for (const t of this.deps.targets()) {
      if (t.lastUsedMs > t.stored.lastUsedMs && now - t.stored.writtenAtMs >= LAST_USED_WRITE_INTERVAL_MS)
        this.record(t);
      if (this.idle(t, now) && this.deps.canFreeze())
        void this.deps.activator.transition(t, () => this.freeze(t));
    }
  }

  private idle(t: Target, now: number): boolean {
    return (
      t.status === 'DEPLOYED' &&
      !t.frozen &&
      !t.transition &&
      t.inflight === 0 &&
      now - t.lastUsedMs >= this.deps.standbyAfterMs
    );
  }

  private async freeze(t: Target): Promise<void> {
    const ac = new AbortController();
    t.freezing = ac;
    try {
      const keepAlive = await this.activeKeepAlive(t, ac.signal);
      // A request that arrived meanwhile is waiting on this transition: give up so it goes on at once.
      if (keepAlive !== 0 || t.inflight > 0 || t.evicted || t.frozen || ac.signal.aborted) return;
      await this.deps.driver.freeze(t.id, ac.signal);
    } catch (err) {
      this.deps.logger.warn({ err, sandbox: t.id }, 'freezing an idle sandbox failed');
      return;
    } finally {
      t.freezing = undefined;
    }
    if (ac.signal.aborted) {
      // Called off by a request: however far the runtime got, the sandbox must run (thaw is idempotent).
      await this.deps.driver.thaw(t.id).catch(() => undefined);
      return;
    }
    t.frozen = true;
    // Dropped from the table while freezing (e.g. deleted or deactivated): leave nothing frozen behind.
    if (t.evicted) {
      await this.deps.driver.thaw(t.id).catch(() => undefined);
      t.frozen = false;
      return;
    }
    this.record(t);
  }

  /** Running keepAlive processes per the daemon's /health; undefined when it does not answer. */
  private async activeKeepAlive(t: Target, signal: AbortSignal): Promise<number | undefined> {
    try {
      const res = await t.pool.request({
        path: '/health',
        method: 'GET',
        signal,
        headersTimeout: HEALTH_TIMEOUT_MS,
        bodyTimeout: HEALTH_TIMEOUT_MS,
      });
      const body = (await res.body.json()) as { activeKeepAlive?: number };
      return res.statusCode === 200 ? Number(body.activeKeepAlive ?? 0) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Writes the run state and lastUsedAt when they differ from the store; one writer per sandbox. */
  record(t: Target): void {
    if (t.writing) {
      t.dirty = true;
      return;
    }
    // Later, not now: a wake-up records RUNNING while its request is still on its way to the sandbox, and a
    // store write (and the reconcile it triggers) would delay that request.
    t.writing = new Promise<void>((r) => setTimeout(r, STATE_WRITE_DELAY_MS))
      .then(() => this.flush(t))
      .finally(() => {
        t.writing = undefined;
      });
  }

  private async flush(t: Target): Promise<void> {
    do {
      t.dirty = false;
      const state = t.frozen ? 'STANDBY' : 'RUNNING';
      const used = t.lastUsedMs;
      const extras: Record<string, string> = {};
      if (state !== t.stored.state) extras.state = state;
      if (used > t.stored.lastUsedMs) extras.lastUsedAt = new Date(used).toISOString();
      if (!Object.keys(extras).length || t.evicted) continue;
      try {
        await this.deps.resources.updateStatus(t.key, { extras });
        t.stored = { state, lastUsedMs: used, writtenAtMs: this.now() };
      } catch (err) {
        this.deps.logger.warn({ err, sandbox: t.id }, 'recording sandbox usage failed');
        return;
      }
    } while (t.dirty);
  }

  /** Waits for the writes under way (shutdown). */
  async drain(targets: Iterable<Target>): Promise<void> {
    await Promise.allSettled([...targets].map((t) => t.writing));
  }
}
