// The output of one process: one list of chunks in arrival order (so `logs` interleaves stdout and stderr as
// they came), capped at its tail, with live subscribers for the streaming routes.

export type OutStream = 'stdout' | 'stderr';

/**
 * Bytes of output kept per process; older output is dropped first (the tail is what people look at). Small on
 * purpose: everything the daemon holds is copied page-table-wise by every fork, so kept logs slow down every exec.
 */
export const MAX_LOG_BYTES = 2 * 1024 * 1024;

interface Chunk {
  stream: OutStream;
  data: Buffer;
}

export type LogListener = (stream: OutStream, data: Buffer) => void;

export class LogBuffer {
  private chunks: Chunk[] = [];
  private listeners = new Set<LogListener>();
  private endListeners = new Set<() => void>();
  private _bytes = 0;
  private _ended = false;

  constructor(private readonly max = MAX_LOG_BYTES) {}

  get bytes(): number {
    return this._bytes;
  }

  get ended(): boolean {
    return this._ended;
  }

  push(stream: OutStream, data: Buffer): void {
    if (data.length === 0) return;
    this.chunks.push({ stream, data });
    this._bytes += data.length;
    while (this._bytes > this.max && this.chunks.length > 0) {
      const first = this.chunks[0];
      const excess = this._bytes - this.max;
      if (first.data.length <= excess) {
        this.chunks.shift();
        this._bytes -= first.data.length;
      } else {
        first.data = first.data.subarray(excess);
        this._bytes -= excess;
      }
    }
    for (const l of this.listeners) l(stream, data);
  }

  /** The kept output of one stream, or of both interleaved. */
  text(stream?: OutStream): string {
    const parts = stream ? this.chunks.filter((c) => c.stream === stream) : this.chunks;
    return Buffer.concat(parts.map((c) => c.data)).toString('utf8');
  }

  /** Replays the kept output to `fn`, then follows new output; returns the unsubscribe function. */
  follow(fn: LogListener, onEnd: () => void): () => void {
    for (const c of this.chunks) fn(c.stream, c.data);
    if (this._ended) {
      onEnd();
      return () => {};
    }
    this.listeners.add(fn);
    this.endListeners.add(onEnd);
    return () => {
      this.listeners.delete(fn);
      this.endListeners.delete(onEnd);
    };
  }

  /** Output will not grow any more (the process is final): followers are told and dropped. */
  end(): void {
    if (this._ended) return;
    this._ended = true;
    const ends = [...this.endListeners];
    this.listeners.clear();
    this.endListeners.clear();
    for (const e of ends) e();
  }
}
