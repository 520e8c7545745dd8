// Tops a pool up in the background: counts the jobs in flight, remembers the last failure instead of
// throwing it (a failed refill only leaves the pool smaller), and settles `idle` when none runs.
export class BackgroundFill {
  inflight = 0;
  /** Why the last job failed, for diagnostics. */
  lastError?: Error;
  private idlePromise: Promise<void> = Promise.resolve();

  /**
   * Starts `count` jobs made by `make`; `next` runs after each one that succeeded, once it no longer counts as in
   * flight (a pool that starts its next job from there sees what is really missing: counted from inside the job,
   * the job itself was still in flight, and a paced refill ended one short).
   */
  start(count: number, make: () => Promise<void>, next?: () => void): void {
    if (count <= 0) return;
    this.inflight += count;
    const jobs = Array.from({ length: count }, () =>
      make().then(
        () => {
          this.inflight--;
          next?.();
        },
        (e: Error) => {
          this.inflight--;
          this.lastError = e;
        },
      ),
    );
    this.idlePromise = Promise.allSettled([this.idlePromise, ...jobs]).then(() => undefined);
  }

  /** Settles when no job is running, those started by the jobs themselves included (tests and close wait on it). */
  async idle(): Promise<void> {
    do await this.idlePromise;
    while (this.inflight > 0);
  }
}
