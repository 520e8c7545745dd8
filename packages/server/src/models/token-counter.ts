// Counts tokens on the tokenizer's own thread (tokenizer-worker.ts, decision 065), so the tokenizer's 400,000
// heap objects never sit on the main thread, whose full garbage collections they made 7× as long. One thread per
// process, shared by the gateways in it and stopped with the last of them. Bounded: an ask not answered within
// its deadline, or a thread that stopped, fails every ask in flight with a 503 (clients retry it) and the thread
// is started again; nothing waits on a thread that will not answer.
import { Worker } from 'node:worker_threads';
import { ApiError } from '../errors.js';
import type { CountAnswer, CountAsk } from './token-counter-wire.js';

/** Time an ask may take beyond the allowance for its characters: a loaded host delays a thread's turn too. */
export const COUNT_DEADLINE_MS = 2_000;
/**
 * Allowance per character counted or queued ahead on the thread: 20 µs, 4× the slowest counting measured on this
 * project's 2-core machine (5 µs a character for random CJK or symbols, 0.05–0.1 µs for prose), so that only a
 * thread that is stuck, not one that is busy, overruns.
 */
const DEADLINE_MS_PER_CHAR = 0.02;
/** Allowance while the thread loads its tables (0.3–0.6 s of CPU quiet, seconds on a loaded host). */
const LOAD_DEADLINE_MS = 30_000;
/** Seconds a client is told to wait before retrying a call whose tokens could not be counted. */
const RETRY_AFTER_S = 1;

interface Pending {
  resolve(counts: number[]): void;
  reject(err: Error): void;
  chars: number;
  timer: NodeJS.Timeout;
}

export interface TokenCounterOptions {
  /** Starts the thread (tests start one that never answers, to see a deadline pass). */
  spawn?: () => Worker;
  /** COUNT_DEADLINE_MS unless given. */
  deadlineMs?: number;
  /** LOAD_DEADLINE_MS unless given. */
  loadDeadlineMs?: number;
}

/** Starts tokenizer-worker: the compiled file beside this one, or from the TypeScript sources through tsx. */
function spawnTokenizer(): Worker {
  const fromSources = import.meta.url.endsWith('.ts');
  const entry = new URL(`./tokenizer-worker.${fromSources ? 'ts' : 'js'}`, import.meta.url);
  if (!fromSources) return new Worker(entry, { name: 'berth-tokenizer' });
  // tsx registers itself on the main thread only (on Node 20): the thread is given it before its entry loads.
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  return new Worker(
    `import(${tsx}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`,
    { eval: true, name: 'berth-tokenizer' },
  );
}

const unavailable = (why: string) =>
  new ApiError(
    'UNAVAILABLE',
    `this call's tokens could not be counted for its budget: ${why}; retry in ${RETRY_AFTER_S} s`,
    { headers: { 'retry-after': String(RETRY_AFTER_S) } },
  );

export class TokenCounter {
  private worker?: Worker;
  private ready = false;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private queuedChars = 0;
  private users = 0;
  private readonly spawn: () => Worker;
  private readonly deadlineMs: number;
  private readonly loadDeadlineMs: number;

  constructor(opts: TokenCounterOptions = {}) {
    this.spawn = opts.spawn ?? spawnTokenizer;
    this.deadlineMs = opts.deadlineMs ?? COUNT_DEADLINE_MS;
    this.loadDeadlineMs = opts.loadDeadlineMs ?? LOAD_DEADLINE_MS;
  }

  /** A gateway uses the thread from now on; the last one to `release` it stops it. */
  retain(): void {
    this.users++;
  }

  async release(): Promise<void> {
    this.users = Math.max(0, this.users - 1);
    if (!this.users) await this.stop();
  }

  /** Starts the thread ahead of the first count (while a gateway uses it), so no call waits for the tables. */
  start(): void {
    if (this.users) this.thread();
  }

  /** The running thread (tests stop it to play a crash). */
  get current(): Worker | undefined {
    return this.worker;
  }

  /** Asks sent and not yet answered. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** The o200k count of each text, in one message to the thread and one back. */
  count(texts: string[]): Promise<number[]> {
    const w = this.thread();
    const id = this.nextId++;
    let chars = 0;
    for (const t of texts) chars += t.length;
    this.queuedChars += chars;
    const ms = Math.round(
      this.deadlineMs + this.queuedChars * DEADLINE_MS_PER_CHAR + (this.ready ? 0 : this.loadDeadlineMs),
    );
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.discard(w, `the token counter did not answer within ${ms} ms`), ms);
      timer.unref();
      this.pending.set(id, { resolve, reject, chars, timer });
      // The thread holds the process open only while an ask waits on it.
      if (this.pending.size === 1) w.ref();
      w.postMessage({ id, texts } satisfies CountAsk);
    });
  }

  /** Stops the thread; asks in flight fail (the server is closing, their calls with it). */
  async stop(): Promise<void> {
    const w = this.worker;
    if (!w) return;
    this.worker = undefined;
    this.ready = false;
    this.failAll(unavailable('the server is shutting down'));
    await w.terminate();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const w = this.spawn();
    w.unref();
    w.on('message', (m: CountAnswer) => this.answered(w, m));
    w.on('error', (err) => this.discard(w, `the token counter failed (${err.message})`));
    w.on('exit', (code) => this.discard(w, `the token counter stopped (exit code ${code})`));
    this.worker = w;
    return w;
  }

  private answered(w: Worker, m: CountAnswer) {
    if (w !== this.worker) return;
    if ('ready' in m) {
      this.ready = true;
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    this.queuedChars -= p.chars;
    if (!this.pending.size) w.unref();
    if ('error' in m) p.reject(new Error(`the tokenizer failed: ${m.error}`));
    else p.resolve(m.counts);
  }

  /**
   * A thread that stopped or overran a deadline is done with: every ask on it fails at once, and a thread that
   * had loaded its tables is replaced now (one that never loaded them is started again by the next count).
   */
  private discard(w: Worker, why: string) {
    if (w !== this.worker) return;
    this.worker = undefined;
    const wasReady = this.ready;
    this.ready = false;
    this.failAll(unavailable(why));
    void w.terminate();
    if (this.users && wasReady) this.thread();
  }

  private failAll(err: Error) {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    this.queuedChars = 0;
  }
}

/** The process's counter: every gateway in the process shares its thread and its tables. */
export const tokenCounter = new TokenCounter();
