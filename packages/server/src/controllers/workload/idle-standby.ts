// Scale to zero without a cold start (decision 090): when the scaler would remove a workload's last replica after
// its idle window, the replica is kept frozen instead (the sandboxes' standby, then their deep standby once the
// runtime pushes its memory out) for a retention window, and the next request wakes it through the gateway's
// activator as it wakes any sandbox. A kept replica is still the workload's replica of its revision and spec, so a
// redeploy, a changed spec, a deletion or a deactivation removes it with the others (replicas.ts deploy/remove): it
// never answers with code or envs the workload no longer has. What the scaler decides is here; the freeze is the
// gateway's (it alone owns run state), handed in as `freeze`.
import type { Logger } from 'pino';

/** When a replica was kept frozen at scale to zero, and until when. */
export interface StandbyMark {
  sinceMs: number;
  untilMs: number;
}

/** What this file reads of a replica (replicas.ts Replica; structural, so replicas.ts may import this file). */
export interface KeptReplica {
  readonly id: string;
  inflight: number;
  lastUsedMs: number;
  gone: boolean;
  /** Set while the replica is kept frozen at scale to zero; a request since then ends it (keptInStandby). */
  standby?: StandbyMark;
}

interface Owner {
  workspace: string;
  kind: 'Agent' | 'Function' | 'Application';
  name: string;
}

/**
 * Whether the replica is the workload's scaled-to-zero replica, frozen and not used since: it serves nothing now, so
 * the object's `replicas` does not count it. A request after `sinceMs` (the gateway writes lastUsedMs at each request's
 * start and end) makes it a serving replica again, without a write on the request path.
 */
export function keptInStandby(r: KeptReplica): boolean {
  return r.standby !== undefined && !r.gone && r.inflight === 0 && r.lastUsedMs <= r.standby.sinceMs;
}

/** The scaler's answer for an idle last replica: kept frozen, removed, or left alone this tick (it is in use). */
export type KeepAnswer = 'kept' | 'remove' | 'busy';

export interface IdleStandbyDeps<R extends KeptReplica> {
  /** How long a scaled-to-zero replica is kept frozen; 0: removed at once, as before decision 090. */
  retentionMs: number;
  /**
   * Freezes the replica through the gateway's activator (or finds it frozen already): true once it is frozen, false
   * when it cannot be (no freezer on this host) or a request called the freeze off.
   */
  freeze: (w: Owner, r: R) => Promise<boolean>;
  /** Said on the workload's object. */
  onEvent?: (w: Owner, message: string) => void;
  logger?: Logger;
  now?: () => number;
}

export class IdleStandby<R extends KeptReplica = KeptReplica> {
  private readonly now: () => number;
  /** Freezes asked for and not answered yet: the scaler's next tick must not take them for a failed freeze. */
  private readonly freezing = new WeakSet<KeptReplica>();

  constructor(private readonly deps: IdleStandbyDeps<R>) {
    this.now = deps.now ?? Date.now;
  }

  get retentionMs(): number {
    return this.deps.retentionMs;
  }

  /**
   * The last replica of `w` has been idle for the removal delay: keep it frozen (the first time, or while its
   * retention lasts), remove it (retention 0 or over, or no freeze possible), or leave it this tick (used meanwhile).
   */
  async keep(w: Owner, r: R): Promise<KeepAnswer> {
    if (this.deps.retentionMs <= 0) return 'remove';
    if (this.freezing.has(r)) return 'busy';
    const now = this.now();
    if (r.standby) {
      if (now < r.standby.untilMs) return 'kept';
      const message = `replica ${r.id} removed: kept in standby since ${new Date(r.standby.sinceMs).toISOString()} with no request, its retention (${Math.round(this.deps.retentionMs / 1000)} s) is over; the next request starts a new one`;
      this.deps.logger?.info({ workspace: w.workspace, name: w.name, replica: r.id }, message);
      this.deps.onEvent?.(w, message);
      return 'remove';
    }
    const used = r.lastUsedMs;
    this.freezing.add(r);
    let frozen = false;
    try {
      frozen = await this.deps.freeze(w, r);
    } catch (err) {
      this.deps.logger?.warn({ err, replica: r.id }, 'freezing a scaled-to-zero replica failed');
    } finally {
      this.freezing.delete(r);
    }
    // A request came while the freeze ran (it called the freeze off, or woke the replica right after): in use.
    if (r.gone || r.inflight > 0 || r.lastUsedMs !== used) return 'busy';
    if (!frozen) return 'remove';
    const sinceMs = Math.max(this.now(), used);
    r.standby = { sinceMs, untilMs: sinceMs + this.deps.retentionMs };
    const message = `scaled to zero: replica ${r.id} kept in standby (frozen, not serving) until ${new Date(r.standby.untilMs).toISOString()}; the next request wakes it`;
    this.deps.logger?.info({ workspace: w.workspace, name: w.name, replica: r.id }, message);
    this.deps.onEvent?.(w, message);
    return 'kept';
  }

  /** Clears the mark of a kept replica a request has woken (the scaler asks at each tick). */
  woken(r: KeptReplica): boolean {
    if (!r.standby || keptInStandby(r) || r.gone) return false;
    this.deps.logger?.info(
      { replica: r.id, standbyMs: r.lastUsedMs - r.standby.sinceMs },
      'scaled-to-zero replica woken by a request',
    );
    r.standby = undefined;
    return true;
  }
}
