// Applies the scale decisions of agents and functions: every TICK_MS it samples each workload's concurrency as the
// gateway reports it (requests in flight at each replica, requests waiting for one to start), asks the pure KPA
// (autoscaler.ts) how many replicas it wants and starts what is missing; and it removes a replica idle for
// REMOVE_AFTER_IDLE_MS while the workload runs more than its minScale. Standby before that (a frozen replica) is the
// gateway's one idle mechanism, the same as sandboxes' (gateway/idle.ts). The last replica, instead of being removed,
// may be kept frozen for a retention window (idle-standby.ts, decision 090).
import type { Logger } from 'pino';
import {
  decide,
  initialScaleState,
  type Sample,
  type ScaleState,
  STABLE_WINDOW_MS,
  TICK_MS,
} from './autoscaler.js';
import type { IdleStandby } from './idle-standby.js';
import type { Replica, ReplicaSet, Workload } from './replicas.js';

/** Requests in flight per replica before another is started (while under maxScale); the gateway routes by it too. */
export const TARGET_CONCURRENCY = 10;
/** A replica idle (frozen) this long is removed: standby is warm, a removed one costs a cold start. */
export const REMOVE_AFTER_IDLE_MS = 5 * 60_000;
/** How often idle replicas are looked at for removal: a second late on five minutes is nothing. */
const SCALE_IN_TICK_MS = 1_000;

export interface ScalerDeps {
  replicas: ReplicaSet;
  logger: Logger;
  removeAfterMs?: number;
  /** Keeps the last replica frozen at scale to zero instead of removing it; none: removed (decision 090). */
  standby?: IdleStandby<Replica>;
  now?: () => number;
}

export class Scaler {
  private readonly now: () => number;
  private readonly scaling = new WeakMap<Workload, { samples: Sample[]; state: ScaleState }>();
  private timers: NodeJS.Timeout[] = [];

  constructor(private readonly deps: ScalerDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(): void {
    this.timers = [
      setInterval(() => this.autoscale(), TICK_MS),
      setInterval(() => void this.scaleIn(), SCALE_IN_TICK_MS),
    ];
    for (const t of this.timers) t.unref();
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
  }

  /** One KPA tick per workload: sample the concurrency, decide, start what is missing. */
  autoscale(): void {
    const now = this.now();
    for (const w of this.deps.replicas.all()) {
      let s = this.scaling.get(w);
      if (!s) {
        s = { samples: [], state: initialScaleState() };
        this.scaling.set(w, s);
      }
      const live = w.replicas.filter((r) => !r.gone);
      const concurrency = live.reduce((a, r) => a + r.inflight, 0) + w.waiting;
      s.samples.push({ timeMs: now, concurrency });
      s.samples = s.samples.filter((x) => x.timeMs > now - STABLE_WINDOW_MS);
      const d = decide(
        { target: TARGET_CONCURRENCY, minScale: w.run.minScale, maxScale: w.run.maxScale },
        s.samples,
        live.length,
        now,
        s.state,
      );
      s.state = d.state;
      // Scale-in is by idleness (scaleIn): standby first, removal later; the decision only adds replicas.
      if (d.desired > live.length) {
        const started = this.deps.replicas.scaleOut(w, d.desired);
        if (started)
          this.deps.logger.info(
            { workload: w.key, desired: d.desired, ready: live.length, panicking: d.panicking },
            'scaling out',
          );
      }
    }
  }

  /**
   * Removes replicas idle for the removal delay, above each workload's minScale; the last one is kept frozen
   * instead while the retention allows (idle-standby.ts).
   */
  async scaleIn(): Promise<void> {
    const now = this.now();
    const removeAfter = this.deps.removeAfterMs ?? REMOVE_AFTER_IDLE_MS;
    const { standby } = this.deps;
    for (const w of this.deps.replicas.all()) {
      let live = w.replicas.filter((r) => !r.gone).length;
      for (const r of [...w.replicas]) {
        standby?.woken(r);
        if (r.gone || r.inflight > 0 || live <= w.run.minScale) continue;
        if (now - r.lastUsedMs < removeAfter) continue;
        if (live === 1 && standby && (await standby.keep(w, r)) !== 'remove') continue;
        if (r.gone || r.inflight > 0) continue;
        live--;
        await this.deps.replicas.scaleIn(w, r);
      }
    }
  }
}
