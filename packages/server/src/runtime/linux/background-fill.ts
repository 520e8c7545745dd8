// Tops a pool up in the background: counts the jobs in flight, remembers the last failure instead of
// throwing it (a failed refill only leaves the pool smaller), and settles `idle` when none runs.
export class BackgroundFill {
  inflight = 0;
  /** Why the last job failed, for diagnostics. */
  lastError?: Error;
  private idlePromise: Promise<void> = Promise.resolve();

  /** Starts `count` jobs made by `make`. */
  start(count: number, make: () => Promise<void>): void {
    if (count <= 0) return;
    this.inflight += count;
    const jobs = Array.from({ length: count }, () =>
      make()
        .catch((e: Error) => {
          this.lastError = e;
        })
        .finally(() => this.inflight--),
    );
    this.idlePromise = Promise.allSettled([this.idlePromise, ...jobs]).then(() => undefined);
  }

  /** Settles when no job is running (tests and close wait on it). */
  idle(): Promise<void> {
    return this.idlePromise;
  }
}
