// The two limits on a request to an agent or function: an idle limit (no byte in either direction for 100 s and
// the request is cut; every byte restarts it) and a hard cap (`spec.runtime.timeout` seconds in all). Bytes are read
// from the client socket's own counters on a shared timer rather than counted per chunk, so streaming costs
// nothing extra and the request body is never touched. A cut aborts the forwarding: the client gets a 504
// problem when no header has left yet, else the stream is ended (proxy.ts).
import { ApiError } from '../errors.js';

/**
 * No byte in either direction for this long and a request is cut: the service's own idle limit, long enough for a
 * model to think before its first token and short enough that a hung replica frees its slot.
 */
export const IDLE_TIMEOUT_MS = 100_000;
/** How often running requests are looked at (a cut comes at most this late), at most a quarter of the idle limit. */
export const CHECK_EVERY_MS = 1_000;

/** What a socket says about its traffic (net.Socket has both). */
export interface ByteCounters {
  readonly bytesRead: number;
  readonly bytesWritten: number;
}

/**
 * How a watched request is cut: `reason` set and `onCut` called once. A plain object, not an AbortController: one per
 * request cost the gateway ~5 % of its CPU under load (the signal made, a listener added and removed), for a cut that
 * almost never comes.
 */
export interface Cut {
  /** Why the request was cut (an ApiError: the client's answer when no header has left yet); unset until then. */
  reason?: Error;
  aborted: boolean;
  /** Called at the cut; the proxy sets it while it forwards. */
  onCut?: () => void;
}

interface Watched {
  socket: ByteCounters;
  bytes: number;
  lastByteMs: number;
  deadlineMs: number;
  timeoutS?: number;
  cut: Cut;
}

export interface DeadlineOptions {
  idleMs?: number;
  now?: () => number;
}

export class RequestDeadlines {
  private readonly watched = new Set<Watched>();
  private readonly idleMs: number;
  private readonly now: () => number;
  private timer?: NodeJS.Timeout;

  constructor(o: DeadlineOptions = {}) {
    this.idleMs = o.idleMs ?? IDLE_TIMEOUT_MS;
    this.now = o.now ?? Date.now;
  }

  /** Starts watching one request; `done` stops (call it once the request is over, whatever the outcome). */
  watch(socket: ByteCounters, timeoutS?: number): { cut: Cut; done: () => void } {
    const now = this.now();
    const w: Watched = {
      socket,
      bytes: socket.bytesRead + socket.bytesWritten,
      lastByteMs: now,
      deadlineMs: timeoutS ? now + timeoutS * 1000 : Number.POSITIVE_INFINITY,
      timeoutS,
      cut: { aborted: false },
    };
    this.watched.add(w);
    if (!this.timer) {
      this.timer = setInterval(() => this.check(), Math.min(CHECK_EVERY_MS, Math.max(10, this.idleMs / 4)));
      this.timer.unref();
    }
    return {
      cut: w.cut,
      done: () => {
        this.watched.delete(w);
        if (!this.watched.size) this.stop();
      },
    };
  }

  /** One look at every request: cuts those idle past the limit or past their cap. */
  check(): void {
    const now = this.now();
    for (const w of this.watched) {
      const bytes = w.socket.bytesRead + w.socket.bytesWritten;
      if (bytes !== w.bytes) {
        w.bytes = bytes;
        w.lastByteMs = now;
      }
      let why: string | undefined;
      if (now >= w.deadlineMs) why = `the request passed its limit of ${w.timeoutS} s (spec.runtime.timeout)`;
      else if (now - w.lastByteMs >= this.idleMs)
        why = `no byte in either direction for ${this.idleMs / 1000} s (the idle limit of a request)`;
      if (!why) continue;
      this.watched.delete(w);
      w.cut.reason = new ApiError('TIMEOUT', why);
      w.cut.aborted = true;
      w.cut.onCut?.();
    }
    if (!this.watched.size) this.stop();
  }

  /** Requests watched now (for tests). */
  get size(): number {
    return this.watched.size;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
