// How many warm sandboxes to keep ready (decisions 058, 084): the pool's base size on top of as many as were created
// in the last DEMAND_WINDOW_MS, never more than its ceiling. A burst of creates then finds the pool grown by the
// creates before it, and a quiet minute shrinks it back to the base (each ready sandbox holds ~8 MB and a network
// namespace). The recent create rate decides, not a guess: a server that creates one sandbox an hour keeps its base.
// The base is kept on top, not as a floor: a create takes its sandbox before the refill that replaces it, and a burst
// defers refills (linux-driver.ts refillSoon), so a pool of exactly the last minute's count enters a burst of that
// size one or two short, and its last creates started cold beside the refills (decision 084 measured it).
export const DEMAND_WINDOW_MS = 60_000;

export class PoolDemand {
  /** Times of the creates in the window, oldest first. */
  private readonly times: number[] = [];

  constructor(
    readonly base: number,
    readonly max: number,
  ) {}

  record(nowMs: number): void {
    this.times.push(nowMs);
    this.forget(nowMs);
  }

  /** The pool size the recent creates ask for. */
  target(nowMs: number): number {
    this.forget(nowMs);
    if (this.base <= 0) return 0;
    return Math.min(this.base + this.times.length, Math.max(this.base, this.max));
  }

  private forget(nowMs: number): void {
    while (this.times.length && nowMs - this.times[0] > DEMAND_WINDOW_MS) this.times.shift();
    // Past the ceiling, older times cannot change the target.
    if (this.times.length > this.max) this.times.splice(0, this.times.length - this.max);
  }
}
