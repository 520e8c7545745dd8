// Group fsync off the event loop: callers ask for "everything written so far is on disk" and share one fsync,
// which runs on libuv's thread pool. Used by the SQLite store (WAL with synchronous=NORMAL writes its frames
// without syncing them; this syncs the WAL before a write is acknowledged; decision 052).
import { fsync } from 'node:fs';

export type SyncFn = (fd: number) => Promise<void>;

const fsyncOnPool: SyncFn = (fd) =>
  new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));

export class FsyncBatch {
  /** The fsync under way; a caller arriving while it runs waits for the next one (its write may postdate it). */
  private running?: Promise<void>;
  private next?: { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void };

  constructor(
    private readonly fd: () => number,
    private readonly sync: SyncFn = fsyncOnPool,
  ) {}

  /** Settles once an fsync that started after this call has finished: what was written before it is durable. */
  durable(): Promise<void> {
    if (!this.running) return this.start();
    if (!this.next) {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.next = { promise, resolve, reject };
    }
    return this.next.promise;
  }

  /** Waits for every fsync asked for so far (close). */
  async idle(): Promise<void> {
    while (this.running) await this.running.catch(() => {});
  }

  private start(): Promise<void> {
    const p = Promise.resolve()
      .then(() => this.sync(this.fd()))
      .finally(() => {
        this.running = undefined;
        const waiting = this.next;
        this.next = undefined;
        if (waiting) this.start().then(waiting.resolve, waiting.reject);
      });
    this.running = p;
    return p;
  }
}
