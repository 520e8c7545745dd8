// The activator (Knative's, in small): counts what is in flight per sandbox and holds a request while its
// sandbox is frozen or being frozen, resuming it first. Concurrent requests share ONE wake; the hot path for
// a running sandbox is two field writes and no promise.
import { ApiError } from '../errors.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Target } from './targets.js';

/**
 * Longest a request is held waiting for its sandbox: a thaw is one write (well under 1 ms), but a freeze
 * already under way must finish first (the runtime bounds that at 5 s). Past this the caller gets a 504.
 */
export const HOLD_TIMEOUT_MS = 10_000;

export interface ActivatorDeps {
  driver: RuntimeDriver;
  /** The sandbox's run state changed (frozen or resumed): record it, off the request path. */
  onStateChange: (t: Target) => void;
  now?: () => number;
}

export class Activator {
  private readonly now: () => number;

  constructor(private readonly deps: ActivatorDeps) {
    this.now = deps.now ?? Date.now;
  }

  /**
   * Counts a request in. Returns undefined when it may go on at once, else a promise that settles once
   * the sandbox runs (rejecting with 502/504, the request then no longer counted).
   */
  enter(t: Target): Promise<void> | undefined {
    t.inflight++;
    t.lastUsedMs = this.now();
    if (!t.frozen && !t.transition) return undefined;
    return this.hold(t);
  }

  leave(t: Target): void {
    t.inflight--;
    t.lastUsedMs = this.now();
  }

  /**
   * Runs `fn` as the sandbox's one transition: requests arriving meanwhile wait for it. Returns the
   * transition already under way, if any, instead of starting a second one.
   */
  transition(t: Target, fn: () => Promise<void>): Promise<void> {
    if (t.transition) return t.transition;
    const p: Promise<void> = Promise.resolve()
      .then(fn)
      .finally(() => {
        if (t.transition === p) t.transition = undefined;
      });
    t.transition = p;
    return p;
  }

  private async hold(t: Target): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new ApiError(
              'TIMEOUT',
              `sandbox ${JSON.stringify(t.key.name)} did not resume within ${HOLD_TIMEOUT_MS} ms`,
            ),
          ),
        HOLD_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([this.resume(t), timeout]);
    } catch (err) {
      t.inflight--;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  private async resume(t: Target): Promise<void> {
    // A freeze under way is called off (the runtime thaws what it froze); a thaw under way is joined.
    if (t.transition) {
      t.freezing?.abort();
      await t.transition.catch(() => undefined);
    }
    if (!t.frozen) return;
    try {
      await this.transition(t, async () => {
        if (!t.frozen) return;
        await this.deps.driver.thaw(t.id);
        t.frozen = false;
        this.deps.onStateChange(t);
      });
    } catch (err) {
      throw new ApiError(
        'BAD_GATEWAY',
        `sandbox ${JSON.stringify(t.key.name)} could not be resumed: ${(err as Error).message}`,
      );
    }
  }
}
