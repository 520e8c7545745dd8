// The one client of the sandbox API daemon, typed by schema.ts: how the server speaks to a daemon (the runtime's
// instances, builds, job tasks, replicas, the gateway's standby and logs). Over the daemon's unix socket (one
// connection per call, closed after it, as nothing of the server's is meant to keep a sandbox's daemon busy), or
// over a keep-alive pool the caller holds (the gateway's, so a call rides the connections requests use).
import { finished } from 'node:stream/promises';
import { StringDecoder } from 'node:string_decoder';
import { Client, type Dispatcher } from 'undici';
import {
  type ExecStreamEvent,
  type HealthResponse,
  KEEPALIVE_LINE,
  type ProcessJson,
  type ProcessLogs,
  type ProcessRequest,
} from './schema.js';

/** One health probe's bound: the daemon answers /health from memory in well under a millisecond. */
export const HEALTH_PROBE_TIMEOUT_MS = 1_000;
/** How long a freshly started daemon may take to answer (the runtime already waited for its socket). */
export const HEALTH_WAIT_MS = 10_000;
/** Between health probes of a daemon that is starting. */
const HEALTH_RETRY_MS = 5;
/** What the daemon's text log stream sends between lines to keep idle connections open; it is not output. */
const KEEPALIVE = KEEPALIVE_LINE.trimEnd();
/** The origin undici needs; the socket (or the pool) decides where a request really goes. */
const ORIGIN = 'http://sandbox';

/** The daemon answered, but not with success: its status and its body (`{error}` as schema.ts has it). */
export class DaemonError extends Error {
  override name = 'DaemonError';
  constructor(
    readonly status: number,
    readonly body: unknown,
    text: string,
  ) {
    super(`the sandbox daemon answered ${status}: ${text.slice(0, 300)}`);
  }
}

interface Call {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  json?: unknown;
  accept?: string;
  signal?: AbortSignal;
  /** Bound on the answer's headers (ms); none by default (an exec answers when its command ends). */
  timeoutMs?: number;
  /** Bound on each pause of the answer's body (ms); none by default (a followed log is quiet as long as its app). */
  idleMs?: number;
}

export class DaemonClient {
  private constructor(
    private readonly socketPath: string | undefined,
    private readonly pool: Dispatcher | undefined,
  ) {}

  /** A client over the daemon's unix socket: each call opens its own connection and closes it when done. */
  static at(socketPath: string): DaemonClient {
    return new DaemonClient(socketPath, undefined);
  }

  /** A client over a dispatcher the caller keeps (a keep-alive pool to the daemon's socket). */
  static over(pool: Dispatcher): DaemonClient {
    return new DaemonClient(undefined, pool);
  }

  /** GET /health once, bounded by `timeoutMs`. */
  async health(timeoutMs = HEALTH_PROBE_TIMEOUT_MS, signal?: AbortSignal): Promise<HealthResponse> {
    let text: string;
    let status: number;
    try {
      ({ status, text } = await this.text({
        method: 'GET',
        path: '/health',
        timeoutMs,
        idleMs: timeoutMs,
        signal,
      }));
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
        throw new Error(`/health did not answer within ${timeoutMs} ms`);
      throw err;
    }
    if (status !== 200) throw new Error(`/health answered ${status}: ${text.slice(0, 200)}`);
    try {
      return JSON.parse(text) as HealthResponse;
    } catch {
      throw new Error(`/health answered something that is not JSON: ${text.slice(0, 200)}`);
    }
  }

  /** Probes until the daemon answers, the wait runs out (throws the last error), or `signal` aborts. */
  async waitHealthy(signal?: AbortSignal, waitMs = HEALTH_WAIT_MS): Promise<HealthResponse> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      try {
        return await this.health();
      } catch (err) {
        if (Date.now() > deadline || signal?.aborted) throw err;
        await new Promise((r) => setTimeout(r, HEALTH_RETRY_MS));
      }
    }
  }

  /** POST /process answered as JSON (started in the background, or once its ports listen, or once it ended). */
  async start(req: ProcessRequest, signal?: AbortSignal): Promise<ProcessJson> {
    return this.json<ProcessJson>({ method: 'POST', path: '/process', json: req, signal });
  }

  /**
   * POST /process streamed (NDJSON): each piece of output to `onOutput` as it comes, then the process as it ended.
   */
  async exec(
    req: ProcessRequest,
    onOutput: (stream: 'stdout' | 'stderr', data: string) => void,
    signal?: AbortSignal,
  ): Promise<ProcessJson> {
    return this.with(
      { method: 'POST', path: '/process', json: req, accept: 'application/x-ndjson', signal },
      async (res) => {
        if (res.statusCode !== 200) throw await failure(res);
        let buf = '';
        let result: ProcessJson | undefined;
        const dec = new StringDecoder('utf8');
        for await (const chunk of res.body) {
          buf += dec.write(chunk as Buffer);
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            let ev: ExecStreamEvent;
            try {
              ev = JSON.parse(line);
            } catch {
              continue;
            }
            if (ev.type === 'stdout' || ev.type === 'stderr') onOutput(ev.type, ev.data);
            else if (ev.type === 'result') result = JSON.parse(ev.data);
          }
        }
        if (!result) throw new Error('the sandbox daemon ended the exec stream without a result');
        return result;
      },
    );
  }

  /** GET /process/{name}: the process as the daemon sees it now; undefined when it has none of that name. */
  async process(name: string, signal?: AbortSignal): Promise<ProcessJson | undefined> {
    const { status, text } = await this.text({ method: 'GET', path: processPath(name), signal });
    return status === 200 ? (JSON.parse(text) as ProcessJson) : undefined;
  }

  /** DELETE /process/{name}: SIGTERM to its group, SIGKILL after the daemon's grace period. Never throws. */
  async stop(name: string): Promise<void> {
    await this.text({ method: 'DELETE', path: processPath(name) }).catch(() => undefined);
  }

  /** GET /process/{name}/logs: what the daemon kept of its output; undefined when it has no such process. */
  async logs(name: string, timeoutMs?: number, signal?: AbortSignal): Promise<ProcessLogs | undefined> {
    const { status, text } = await this.text({
      method: 'GET',
      path: `${processPath(name)}/logs`,
      timeoutMs,
      idleMs: timeoutMs,
      signal,
    });
    return status === 200 ? (JSON.parse(text) as ProcessLogs) : undefined;
  }

  /**
   * GET /process/{name}/logs/stream: the process's output as it comes (the daemon's framing removed) until it ends;
   * `onOpen` once the daemon has accepted the stream. False when the daemon has no such process (still starting) or
   * could not be reached; true once the stream has ended or was cut. `timeoutMs` bounds the wait for the answer only.
   */
  async logStream(
    name: string,
    write: (text: string) => void,
    signal: AbortSignal,
    opts: { onOpen?: () => void; timeoutMs?: number } = {},
  ): Promise<boolean> {
    let res: Dispatcher.ResponseData;
    let done: () => void;
    try {
      ({ res, done } = await this.open({
        method: 'GET',
        path: `${processPath(name)}/logs/stream`,
        signal,
        timeoutMs: opts.timeoutMs,
      }));
    } catch {
      return false;
    }
    try {
      if (res.statusCode !== 200) {
        await res.body.dump().catch(() => undefined);
        return false;
      }
      opts.onOpen?.();
      const unframe = new Unframer();
      const dec = new StringDecoder('utf8');
      try {
        for await (const c of res.body) write(unframe.push(dec.write(c as Buffer)));
      } catch {
        // Cut (the sandbox went, or the caller left): what came is written.
      }
      write(unframe.end());
      return true;
    } finally {
      done();
    }
  }

  private async json<T>(c: Call): Promise<T> {
    return this.with(c, async (res) => {
      if (res.statusCode !== 200) throw await failure(res);
      return (await res.body.json()) as T;
    });
  }

  private text(c: Call): Promise<{ status: number; text: string }> {
    return this.with(c, async (res) => ({ status: res.statusCode, text: await res.body.text() }));
  }

  /** Sends the call and hands the answer to `use`; the connection (when this client opened one) closes after. */
  private async with<T>(c: Call, use: (res: Dispatcher.ResponseData) => Promise<T>): Promise<T> {
    const { res, done } = await this.open(c);
    try {
      return await use(res);
    } finally {
      done();
    }
  }

  private async open(c: Call): Promise<{ res: Dispatcher.ResponseData; done: () => void }> {
    const body = c.json === undefined ? undefined : JSON.stringify(c.json);
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (c.accept) headers.accept = c.accept;
    const options: Dispatcher.RequestOptions = {
      origin: ORIGIN,
      path: c.path,
      method: c.method,
      headers,
      body,
      signal: c.signal,
      headersTimeout: c.timeoutMs ?? 0,
      bodyTimeout: c.idleMs ?? 0,
    };
    if (this.pool) {
      const res = await this.pool.request(options);
      return { res, done: () => res.body.destroy() };
    }
    const client = new Client(ORIGIN, { socketPath: this.socketPath, headersTimeout: 0, bodyTimeout: 0 });
    const close = () => void client.destroy().catch(() => undefined);
    try {
      const res = await client.request(options);
      return {
        res,
        done: () => {
          res.body.destroy();
          void finished(res.body)
            .catch(() => undefined)
            .finally(close);
        },
      };
    } catch (err) {
      close();
      throw err;
    }
  }
}

const processPath = (name: string) => `/process/${encodeURIComponent(name)}`;

async function failure(res: Dispatcher.ResponseData): Promise<DaemonError> {
  const text = await res.body.text().catch(() => '');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return new DaemonError(res.statusCode, body, text);
}

/**
 * Undoes the framing of the daemon's text log stream: each line starts with `stdout:` or `stderr:` (a partial line's
 * continuation does not), and keepalive lines come between lines. Output is the plain interleaved text.
 */
export class Unframer {
  private held = '';
  private atLineStart = true;

  push(text: string): string {
    let out = '';
    this.held += text;
    while (this.held) {
      if (this.atLineStart) {
        const nl = this.held.indexOf('\n');
        const head = nl < 0 ? this.held : this.held.slice(0, nl);
        if (head === KEEPALIVE && nl >= 0) {
          this.held = this.held.slice(nl + 1);
          continue;
        }
        const m = /^(stdout|stderr):/.exec(this.held);
        if (m) this.held = this.held.slice(m[0].length);
        // A prefix or keepalive split across chunks: wait for the rest.
        else if (nl < 0 && ['stdout:', 'stderr:', KEEPALIVE].some((p) => p.startsWith(head))) break;
        this.atLineStart = false;
      }
      const nl = this.held.indexOf('\n');
      const piece = nl < 0 ? this.held : this.held.slice(0, nl + 1);
      this.held = this.held.slice(piece.length);
      out += piece;
      if (nl >= 0) this.atLineStart = true;
    }
    return out;
  }

  end(): string {
    const rest = this.held === KEEPALIVE ? '' : this.held;
    this.held = '';
    return rest;
  }
}
