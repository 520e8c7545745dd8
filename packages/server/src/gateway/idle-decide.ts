// The standby decision, a pure function of a snapshot of the targets (sandboxes and replicas) and the time passed in
// (as Knative's autoscaler is of its metrics window): which to freeze, whose usage to record. The sweeper (idle.ts)
// applies it.
import { LAST_USED_WRITE_INTERVAL_MS } from './usage-writer.js';

/** One target as the decision sees it; `ref` is handed back as is. */
export interface IdleInput<T> {
  ref: T;
  /** Its usage is written to its object (a sandbox's; a replica's is not). */
  recorded: boolean;
  /** The store status: only DEPLOYED goes to standby (DEPLOYING is a spec update being applied). */
  status: string;
  frozen: boolean;
  /** A freeze or thaw is under way. */
  transitioning: boolean;
  inflight: number;
  lastUsedMs: number;
  /** lastUsedAt as last written to the store, and when. */
  writtenLastUsedMs: number;
  writtenAtMs: number;
  /** The daemon reported a running keepAlive process; it holds the sandbox awake until this time. */
  keepAliveUntilMs?: number;
}

export interface IdleDecision<T> {
  /** Idle for the standby delay, nothing in flight, no keepAlive process known. */
  freeze: T[];
  /** Used since lastUsedAt was written, and the last write is at least LAST_USED_WRITE_INTERVAL_MS old. */
  recordUsage: T[];
}

export function decide<T>(
  snapshot: Iterable<IdleInput<T>>,
  nowMs: number,
  standbyAfterMs: number,
): IdleDecision<T> {
  const out: IdleDecision<T> = { freeze: [], recordUsage: [] };
  for (const s of snapshot) {
    if (
      s.recorded &&
      s.lastUsedMs > s.writtenLastUsedMs &&
      nowMs - s.writtenAtMs >= LAST_USED_WRITE_INTERVAL_MS
    )
      out.recordUsage.push(s.ref);
    if (
      s.status === 'DEPLOYED' &&
      !s.frozen &&
      !s.transitioning &&
      s.inflight === 0 &&
      nowMs - s.lastUsedMs >= standbyAfterMs &&
      !(s.keepAliveUntilMs !== undefined && s.keepAliveUntilMs > nowMs)
    )
      out.freeze.push(s.ref);
  }
  return out;
}
