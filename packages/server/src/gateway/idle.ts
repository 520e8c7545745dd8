// Standby, applied to sandboxes and replicas alike (the one idle mechanism): every tick the sweeper takes a snapshot
// of the targets, asks the pure decision (idle-decide.ts) what to do, and does it — freezes through the activator
// (which owns run state) after asking the daemon for keepAlive processes, and hands sandboxes' usage to the writer.
// Nothing is decided here.
import type { Logger } from 'pino';
import { DaemonClient } from '../sandbox-api/client.js';
import type { Activator } from './activator.js';
import { decide } from './idle-decide.js';
import type { Target } from './targets.js';
import type { UsageWriter } from './usage-writer.js';

/** How long the daemon may take to say whether a keepAlive process runs; no answer means no freeze. */
export const HEALTH_TIMEOUT_MS = 2_000;
/**
 * A sandbox whose daemon reported a keepAlive process is not asked again for this long: such processes run
 * for minutes, and asking at every tick would be a request per second per sandbox for nothing.
 */
export const KEEP_ALIVE_RECHECK_MS = 5_000;
/** Sweep period bounds: a quarter of the standby delay, so standby lands at most 25% late. */
const MIN_TICK_MS = 50;
const MAX_TICK_MS = 1_000;

export interface IdleDeps {
  activator: Activator;
  usage: UsageWriter;
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
  private readonly keepAliveUntil = new WeakMap<Target, number>();
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
    const { activator, usage } = this.deps;
    const now = this.now();
    const snapshot = [...this.deps.targets()].map((t) => {
      const run = activator.view(t);
      const written = usage.written(t);
      return {
        ref: t,
        recorded: t.recordsUsage,
        status: t.status,
        frozen: run.frozen,
        transitioning: run.transitioning,
        inflight: run.inflight,
        lastUsedMs: run.lastUsedMs,
        writtenLastUsedMs: written.lastUsedMs,
        writtenAtMs: written.writtenAtMs,
        keepAliveUntilMs: this.keepAliveUntil.get(t),
      };
    });
    const d = decide(snapshot, now, this.deps.standbyAfterMs);
    for (const t of d.recordUsage) usage.record(t);
    if (!this.deps.canFreeze()) return;
    for (const t of d.freeze) void activator.standby(t, (signal) => this.noKeepAlive(t, signal));
  }

  /** Asked inside the freeze: true when the daemon answers and runs no keepAlive process. */
  private async noKeepAlive(t: Target, signal: AbortSignal): Promise<boolean> {
    const n = await this.activeKeepAlive(t, signal);
    if (n !== undefined && n > 0) this.keepAliveUntil.set(t, this.now() + KEEP_ALIVE_RECHECK_MS);
    return n === 0;
  }

  /** Running keepAlive processes per the daemon's /health; undefined when it does not answer. */
  private async activeKeepAlive(t: Target, signal: AbortSignal): Promise<number | undefined> {
    try {
      const health = await DaemonClient.over(t.conn.pool).health(HEALTH_TIMEOUT_MS, signal);
      return Number(health.activeKeepAlive ?? 0);
    } catch {
      return undefined;
    }
  }
}
