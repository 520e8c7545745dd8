// The activator (Knative's, in small) owns each sandbox's run state: frozen or not, the one transition (freeze
// or thaw) under way, requests in flight, last use. It holds a request while its sandbox is frozen or being
// frozen and resumes it first; concurrent requests share ONE wake, and at most MAX_HELD_PER_TARGET wait. It
// also runs the freeze the idle sweeper asks for, so every write of run state is in this file. The hot path for
// a running sandbox is one WeakMap lookup, two field writes and no promise.
import type { Logger } from 'pino';
import { ApiError } from '../errors.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Target } from './targets.js';

/** The `code` of the error a request gets when its target's thaw failed (a workload's replica is replaced). */
export const WAKE_FAILED = 'WAKE_FAILED';
export const isWakeFailure = (err: unknown) => err instanceof ApiError && err.opts.code === WAKE_FAILED;

/**
 * Longest a request is held waiting for its sandbox: a thaw is one write (well under 1 ms), but a freeze
 * already under way must finish first (the runtime bounds that at 5 s). Past this the caller gets a 504.
 */
export const HOLD_TIMEOUT_MS = 10_000;
/**
 * Requests held per sandbox while it wakes. A wake takes under a millisecond, so a queue this deep means the
 * sandbox is not coming back in time; each held request keeps a client socket and its parsed head in memory,
 * and a flood of them (a client retrying in a loop) must not grow without bound. Beyond it: 503 + Retry-After,
 * the caller comes back once the sandbox runs (Knative's breaker answers the same way).
 */
export const MAX_HELD_PER_TARGET = 256;
/** How soon a request turned away by a full hold queue may retry: a wake is well under this. */
export const HOLD_FULL_RETRY_AFTER_S = 1;

/** A sandbox's run state as others may read it. */
export interface RunView {
  readonly frozen: boolean;
  /** A freeze or a thaw is under way. */
  readonly transitioning: boolean;
  /** Requests in flight and tunnels open: while above 0 the sandbox never goes to standby. */
  readonly inflight: number;
  /** Epoch ms of the last request start or end. */
  readonly lastUsedMs: number;
}

interface RunState {
  frozen: boolean;
  /** The freeze or thaw under way: requests wait for it (one shared promise, never one per request). */
  transition?: Promise<unknown>;
  /** Aborts the freeze under way, if any: a request that arrives meanwhile undoes it instead of waiting. */
  freezing?: AbortController;
  inflight: number;
  /** Requests waiting for the transition; bounded by `maxHeld`. */
  held: number;
  lastUsedMs: number;
}

export interface ActivatorDeps {
  driver: RuntimeDriver;
  logger: Logger;
  /** The sandbox's run state changed (frozen or resumed): record it, off the request path. */
  onStateChange: (t: Target) => void;
  now?: () => number;
  /** Tests lower it to reach the bound with a handful of requests. */
  maxHeld?: number;
}

export class Activator {
  private readonly now: () => number;
  private readonly maxHeld: number;
  private readonly runs = new WeakMap<Target, RunState>();

  constructor(private readonly deps: ActivatorDeps) {
    this.now = deps.now ?? Date.now;
    this.maxHeld = deps.maxHeld ?? MAX_HELD_PER_TARGET;
  }

  private state(t: Target): RunState {
    let r = this.runs.get(t);
    if (!r) {
      r = { frozen: t.loaded.frozen, inflight: 0, held: 0, lastUsedMs: t.loaded.lastUsedMs };
      this.runs.set(t, r);
    }
    return r;
  }

  view(t: Target): RunView {
    const r = this.state(t);
    return {
      frozen: r.frozen,
      transitioning: r.transition !== undefined,
      inflight: r.inflight,
      lastUsedMs: r.lastUsedMs,
    };
  }

  /**
   * Counts a request in. Returns undefined when it may go on at once, else a promise that settles once the
   * sandbox runs (rejecting with 502/503/504, the request then no longer counted).
   */
  enter(t: Target): Promise<void> | undefined {
    const r = this.state(t);
    if (!r.frozen && !r.transition) {
      r.inflight++;
      r.lastUsedMs = this.now();
      return undefined;
    }
    if (r.held >= this.maxHeld)
      return Promise.reject(
        new ApiError(
          'UNAVAILABLE',
          `sandbox ${JSON.stringify(t.key.name)} is waking up and ${r.held} requests already wait for it`,
          { headers: { 'retry-after': String(HOLD_FULL_RETRY_AFTER_S) } },
        ),
      );
    r.inflight++;
    r.lastUsedMs = this.now();
    return this.hold(t, r);
  }

  leave(t: Target): void {
    const r = this.state(t);
    r.inflight--;
    r.lastUsedMs = this.now();
  }

  /**
   * Freezes an idle sandbox as its one transition, unless `stillIdle` (asked inside it) says no, a request
   * arrives meanwhile (which aborts it and goes on), or the entry left the table. Resolves true once frozen.
   */
  standby(t: Target, stillIdle: (signal: AbortSignal) => Promise<boolean>): Promise<boolean> {
    const r = this.state(t);
    if (r.transition) return Promise.resolve(false);
    return this.transition(r, async () => {
      const ac = new AbortController();
      r.freezing = ac;
      try {
        const idle = await stillIdle(ac.signal);
        if (!idle || r.inflight > 0 || t.evicted || r.frozen || ac.signal.aborted) return false;
        await this.deps.driver.freeze(t.id, ac.signal);
      } catch (err) {
        this.deps.logger.warn({ err, sandbox: t.id }, 'freezing an idle sandbox failed');
        return false;
      } finally {
        r.freezing = undefined;
      }
      if (ac.signal.aborted || t.evicted) {
        // Called off by a request, or dropped from the table meanwhile (deleted, deactivated): however far the
        // runtime got, the sandbox must not stay frozen (thaw is idempotent).
        await this.deps.driver.thaw(t.id).catch(() => undefined);
        return false;
      }
      r.frozen = true;
      this.deps.logger.info(
        { workspace: t.key.workspace, name: t.key.name, idleMs: this.now() - r.lastUsedMs },
        'sandbox standby',
      );
      this.deps.onStateChange(t);
      return true;
    });
  }

  /** Runs `fn` as the sandbox's one transition; requests arriving meanwhile wait for it. */
  private transition<T>(r: RunState, fn: () => Promise<T>): Promise<T> {
    const p: Promise<T> = Promise.resolve()
      .then(fn)
      .finally(() => {
        if (r.transition === p) r.transition = undefined;
      });
    r.transition = p;
    return p;
  }

  private async hold(t: Target, r: RunState): Promise<void> {
    r.held++;
    const startedMs = this.now();
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
      if (await Promise.race([this.resume(t, r), timeout]))
        this.deps.logger.info(
          { workspace: t.key.workspace, name: t.key.name, wakeMs: this.now() - startedMs },
          'sandbox woken',
        );
    } catch (err) {
      r.inflight--;
      throw err;
    } finally {
      r.held--;
      clearTimeout(timer);
    }
  }

  /** Resumes the sandbox; true when this call's thaw is the one that woke it. */
  private async resume(t: Target, r: RunState): Promise<boolean> {
    // A freeze under way is called off (the runtime thaws what it froze); a thaw under way is joined.
    if (r.transition) {
      r.freezing?.abort();
      await r.transition.catch(() => undefined);
    }
    if (!r.frozen) return false;
    let woke = false;
    try {
      await (r.transition ??
        this.transition(r, async () => {
          if (!r.frozen) return;
          await this.deps.driver.thaw(t.id);
          r.frozen = false;
          woke = true;
          this.deps.onStateChange(t);
        }));
    } catch (err) {
      throw new ApiError(
        'BAD_GATEWAY',
        `sandbox ${JSON.stringify(t.key.name)} could not be resumed: ${(err as Error).message}`,
        { code: WAKE_FAILED },
      );
    }
    return woke;
  }
}
