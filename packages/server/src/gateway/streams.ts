// Requests that can last (a file watch, a log tail, an SSE or `follow` stream, a terminal or port WebSocket) are
// capped per sandbox, below the daemon pool's POOL_CONNECTIONS: each one holds an upstream connection for as long
// as the client likes, and without a cap enough of them starve every exec of a connection. Beyond the cap the
// caller gets 429 RATE_LIMITED with Retry-After; short requests are never counted.
import { ApiError } from '../errors.js';
import { POOL_CONNECTIONS } from './targets.js';

/**
 * Long-lived requests per sandbox. Half the daemon pool, so the other half always serves execs, file reads
 * and the keepAlive check, however many watches a client opens.
 */
export const MAX_STREAMS_PER_SANDBOX = 32;
/** A stream slot frees when a client closes one; a few seconds is a fair wait before asking again. */
export const STREAMS_FULL_RETRY_AFTER_S = 5;

const LONG_PATHS = [
  /^\/watch\/filesystem(?:[/?]|$)/,
  /^\/process\/[^/?]+\/logs\/stream(?:[/?]|$)/,
  /^\/terminal\/ws(?:[/?]|$)/,
];
const FLAG_PARAMS = ['stream', 'follow'];

const truthy = (v: string | null) => v !== null && v !== 'false' && v !== '0';

/**
 * Whether a request to a sandbox can last: `path` is what is forwarded (the sandbox's own path and query),
 * `upgrade` a WebSocket or other tunnel (they last until either side closes). A GET of `/mcp` is the MCP
 * server's own event stream.
 */
export function isLongLived(method: string | undefined, path: string, upgrade: boolean): boolean {
  if (upgrade) return true;
  if (LONG_PATHS.some((re) => re.test(path))) return true;
  if (method === 'GET' && /^\/mcp(?:[/?]|$)/.test(path)) return true;
  const q = path.indexOf('?');
  if (q < 0) return false;
  const params = new URLSearchParams(path.slice(q + 1));
  return FLAG_PARAMS.some((p) => truthy(params.get(p)));
}

/** Counts the long-lived requests open per sandbox (by any key the caller gives: the table entry). */
export class StreamCap<K extends object> {
  private readonly open = new WeakMap<K, number>();

  constructor(private readonly max = MAX_STREAMS_PER_SANDBOX) {
    if (max >= POOL_CONNECTIONS) throw new Error('the stream cap must leave pool connections for the rest');
  }

  count(k: K): number {
    return this.open.get(k) ?? 0;
  }

  /** Takes a slot or throws 429; returns the release, which is safe to call more than once. */
  acquire(k: K, name: string): () => void {
    const n = this.count(k);
    if (n >= this.max)
      throw new ApiError(
        'RATE_LIMITED',
        `sandbox ${JSON.stringify(name)} already has ${n} long-lived requests open (watch, log stream, terminal); close one first`,
        { headers: { 'retry-after': String(STREAMS_FULL_RETRY_AFTER_S) } },
      );
    this.open.set(k, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.open.set(k, this.count(k) - 1);
    };
  }
}
