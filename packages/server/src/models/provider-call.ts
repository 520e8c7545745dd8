// One request to a provider on undici's dispatch API, without its `request()` wrapper: no URL parsed per call,
// no AsyncResource, no Readable for an answer that is read whole (most non-streamed answers). The body is held
// as it arrives until its reader says how it wants it, whole or as a stream; a stream is made only then, with
// the provider's socket paused while the client reads slower than the provider writes.
import { EventEmitter } from 'node:events';
import { Readable } from 'node:stream';
import { type Dispatcher, util } from 'undici';

/**
 * Cancels a provider call when its caller hangs up. An EventEmitter rather than an AbortController:
 * undici takes either, and this one costs nothing per call (no AbortSignal, no DOMException).
 */
export class Cancel extends EventEmitter {
  aborted = false;
  abort() {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }
}

export interface ProviderCallOptions {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  signal: Cancel;
  headersTimeout: number;
  bodyTimeout: number;
}

export interface ProviderAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: ProviderBody;
}

/** Origins of the base URLs seen (a URL's scheme, userinfo, host and port, normalised as undici's `request()` does). */
const origins = new Map<string, string>();
const ORIGINS_MAX = 1_000;

/** `url` as undici's dispatch takes it: the origin (parsed once per distinct one) and the path with its query. */
function split(url: string): { origin: string; path: string } {
  const at = url.indexOf('/', url.indexOf('//') + 2);
  const head = at < 0 ? url : url.slice(0, at);
  let origin = origins.get(head);
  if (origin === undefined) {
    origin = new URL(head).origin;
    if (origins.size >= ORIGINS_MAX) origins.clear();
    origins.set(head, origin);
  }
  return { origin, path: at < 0 ? '/' : url.slice(at) };
}

/** The answer's body: read once, whole (`whole`, `text`, `json`) or as a stream (`stream`). */
export class ProviderBody {
  private chunks: Buffer[] = [];
  private size = 0;
  private ended = false;
  private error?: Error;
  private readable?: Readable;
  private waiting?: { resolve: (b: Buffer) => void; reject: (e: Error) => void };
  /** Bytes kept at most (`head`): the rest is read and dropped. */
  private keep = Number.POSITIVE_INFINITY;

  constructor(
    private readonly resume: () => void,
    private readonly abort: (err: Error) => void,
  ) {}

  /** A chunk from the provider; false pauses its socket until the stream's reader asks for more. */
  push(chunk: Buffer): boolean {
    if (this.readable) return this.readable.push(chunk);
    if (this.size >= this.keep) return true;
    const part = this.size + chunk.length > this.keep ? chunk.subarray(0, this.keep - this.size) : chunk;
    this.chunks.push(part);
    this.size += part.length;
    return true;
  }

  end() {
    this.ended = true;
    if (this.readable) this.readable.push(null);
    else if (this.waiting) this.waiting.resolve(this.take());
  }

  fail(err: Error) {
    if (this.ended) return;
    this.error = err;
    if (this.readable) this.readable.destroy(err);
    else if (this.waiting) this.waiting.reject(err);
  }

  private take(): Buffer {
    const b = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
    this.chunks = [];
    return b;
  }

  /** The whole body once it has arrived. */
  whole(): Promise<Buffer> {
    if (this.error) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve(this.take());
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
    });
  }

  async text(): Promise<string> {
    return (await this.whole()).toString('utf8');
  }

  /** The body's first `n` bytes as text, the rest read and dropped (an error answer of any size). */
  head(n: number): Promise<string> {
    this.keep = n;
    if (this.size > n) {
      this.chunks = [this.take().subarray(0, n)];
      this.size = n;
    }
    return this.text();
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }

  /** The body as a stream; destroying it before its end stops the provider's answer. */
  stream(): Readable {
    const r = new Readable({
      read: () => this.resume(),
      destroy: (err, cb) => {
        if (!this.ended && !this.error) this.abort(err ?? new Error('the answer’s reader left'));
        cb(err);
      },
    });
    this.readable = r;
    for (const c of this.chunks) r.push(c);
    this.chunks = [];
    if (this.error) r.destroy(this.error);
    else if (this.ended) r.push(null);
    return r;
  }
}

/** The undici handler of one call: settles when the answer's headers arrive (or the call fails before). */
class Call implements Dispatcher.DispatchHandler {
  private abortUpstream?: (err: Error) => void;
  private body?: ProviderBody;
  private readonly onCancel = () => this.abortUpstream?.(new Error('the caller left'));

  constructor(
    private readonly signal: Cancel,
    private readonly resolve: (a: ProviderAnswer) => void,
    private readonly reject: (err: Error) => void,
  ) {
    signal.on('abort', this.onCancel);
  }

  onConnect(abort: (err?: Error) => void) {
    if (this.signal.aborted) return abort(new Error('the caller left'));
    this.abortUpstream = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true;
    this.body = new ProviderBody(resume, (err) => this.abortUpstream?.(err));
    this.resolve({ statusCode, headers: util.parseHeaders(rawHeaders), body: this.body });
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.body!.push(chunk);
  }

  onComplete() {
    this.signal.removeListener('abort', this.onCancel);
    this.body?.end();
  }

  onError(err: Error) {
    this.signal.removeListener('abort', this.onCancel);
    if (this.body) this.body.fail(err);
    else this.reject(err);
  }
}

/** Sends the request; resolves with the answer's status and headers, its body unread. */
export function providerCall(agent: Dispatcher, o: ProviderCallOptions): Promise<ProviderAnswer> {
  return new Promise((resolve, reject) => {
    if (o.signal.aborted) return reject(new Error('the caller left'));
    const { origin, path } = split(o.url);
    agent.dispatch(
      {
        origin,
        path,
        method: o.method as Dispatcher.HttpMethod,
        headers: o.headers,
        body: o.body,
        headersTimeout: o.headersTimeout,
        bodyTimeout: o.bodyTimeout,
      },
      new Call(o.signal, resolve, reject),
    );
  });
}
