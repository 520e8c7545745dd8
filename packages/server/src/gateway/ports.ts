// `/port/{n}/...` of a sandbox, answered by the gateway itself: it connects straight to the sandbox's address on
// port n, where the namespace's ingress rule (runtime/linux/network.ts) hands the connection to 127.0.0.1:n.
// One hop instead of two (the daemon's own /port route stays, for clients that talk to the daemon directly).
import { Pool } from 'undici';
import { ApiError } from '../errors.js';
import type { Target } from './targets.js';

/** Upstream connections per sandbox port; more concurrent requests wait in the pool. */
const PORT_POOL_CONNECTIONS = 64;

/** `/port/<n>[/<path>][?q]` → the port and the path the server inside sees; undefined for other paths. */
export function matchPort(rest: string): { port: number; path: string } | undefined {
  const m = /^\/port\/(\d{1,5})(?=[/?]|$)/.exec(rest);
  if (!m) return undefined;
  const port = Number(m[1]);
  if (port < 1 || port > 65535) return undefined;
  const tail = rest.slice(m[0].length);
  return { port, path: tail.startsWith('/') ? tail : `/${tail}` };
}

/** The keep-alive pool to one port of the sandbox, made on first use and closed with the target. */
export function portPool(t: Target, port: number): Pool {
  let pool = t.conn.ports.get(port);
  if (!pool) {
    pool = new Pool(`http://${t.conn.address}:${port}`, {
      connections: PORT_POOL_CONNECTIONS,
      // Long polls, SSE and slow pages are the application's business: no time limit of the gateway's own.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    t.conn.ports.set(port, pool);
  }
  return pool;
}

/** Dev servers (Vite, Next) answer only Hosts they know; localhost is always one of them. */
export const portHost = (port: number) => `localhost:${port}`;

export function portUnreachable(t: Target, port: number, err: Error & { code?: string }): ApiError {
  const name = JSON.stringify(t.key.name);
  if (err.code === 'UND_ERR_CONNECT_TIMEOUT')
    return new ApiError('TIMEOUT', `port ${port} of sandbox ${name} did not accept a connection in time`);
  return new ApiError(
    'BAD_GATEWAY',
    `nothing answered on port ${port} in sandbox ${name}: ${err.code ?? err.message}`,
  );
}
