// Which replica a request of an agent or function must reach, when the caller has a conversation going:
// - a thread (`X-Service-Thread-Id`, `X-Blaxel-Thread-Id` or `Thread-Id`) stays on one revision AND one replica for
//   `spec.revision.stickySessionTtl` seconds after its last request, so a canary split never moves it and an agent
//   that keeps the thread in memory finds it; a replica scaled away hands the thread to another of the same
//   revision, a revision rolled away to the active one;
// - an MCP session (`Mcp-Session-Id`, issued by the server in an answer) stays on the replica that issued it; once
//   that replica is gone the session is answered 404, the MCP spec's signal for the client to initialise again.
// Everything else is free: the canary draw and the least busy replica (workloads.ts, replicas.ts).
import type { IncomingHttpHeaders } from 'node:http';
import type { Replica, Workload } from '../controllers/workload/replicas.js';
import { ApiError } from '../errors.js';
import { ExpiringLru } from './expiring-lru.js';

/** Thread headers, first found wins (DESIGN.md §4: the specification's name, the SDK's, the bare one). */
export const THREAD_HEADERS = ['x-service-thread-id', 'x-blaxel-thread-id', 'thread-id'] as const;
export const MCP_SESSION_HEADER = 'mcp-session-id';
/**
 * Seconds a thread stays on its replica after its last request when `spec.revision.stickySessionTtl` is unset
 * (0 turns stickiness off): as long as an idle replica is kept before it is removed (REMOVE_AFTER_IDLE_MS), past
 * which the memory a thread could come back to is gone anyway.
 */
export const DEFAULT_STICKY_TTL_S = 300;
/**
 * Threads and sessions remembered at once, each map: about 200 bytes an entry, so some 20 MB at the bound; a client
 * that invents an id per request only pushes out the least recently used.
 */
export const MAX_PINS = 100_000;
/**
 * An MCP session unused this long is forgotten (its next request is routed freely, and a replica that no longer
 * knows it answers 404 itself): MCP servers keep sessions in memory, and few keep an idle one longer.
 */
export const MCP_SESSION_TTL_MS = 60 * 60_000;

interface ThreadPin {
  revision: string;
  replica: Replica;
}

/** Where a request goes: the revision to serve it, and the replica when one is pinned and alive. */
export interface Route {
  w: Workload;
  replica?: Replica;
  /** Records the replica the request went to (a new or moved thread). */
  pin?: (r: Replica) => void;
}

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v) || undefined;

export function threadOf(headers: IncomingHttpHeaders): string | undefined {
  for (const h of THREAD_HEADERS) {
    const v = first(headers[h]);
    if (v) return v;
  }
  return undefined;
}

export class Affinity {
  private readonly threads: ExpiringLru<string, ThreadPin>;
  private readonly sessions: ExpiringLru<string, Replica>;

  constructor(now: () => number, maxPins = MAX_PINS) {
    this.threads = new ExpiringLru(maxPins, now);
    this.sessions = new ExpiringLru(maxPins, now);
  }

  /**
   * The route of one request to `w` (the primary workload; its canary is `w.canary`). `draw` is the free choice of a
   * revision (the canary split). Throws 404 for an MCP session whose replica is gone.
   */
  route(w: Workload, headers: IncomingHttpHeaders, draw: (w: Workload) => Workload): Route {
    const session = first(headers[MCP_SESSION_HEADER]);
    if (session) {
      const key = `${w.key}\n${session}`;
      const r = this.sessions.get(key, MCP_SESSION_TTL_MS);
      if (r && !r.gone) return { w: owner(w, r.revision), replica: r };
      // The entry stays until its TTL: an MCP client sends several requests of one session at once (its SSE GET and
      // its next POST), and each must be told the session ended, not the first alone while the rest are drawn to a
      // replica that never knew it.
      if (r) throw sessionEnded(session);
    }
    const thread = threadOf(headers);
    const ttlS = w.route?.stickyTtlS ?? DEFAULT_STICKY_TTL_S;
    if (!thread || ttlS <= 0) return { w: draw(w) };
    const ttlMs = ttlS * 1000;
    const key = `${w.key}\n${thread}`;
    const pin = this.threads.get(key, ttlMs);
    const rev = pin ? owner(w, pin.revision) : draw(w);
    if (pin && rev.run.id === pin.revision && !pin.replica.gone) return { w: rev, replica: pin.replica };
    return { w: rev, pin: (r) => this.threads.set(key, { revision: rev.run.id, replica: r }, ttlMs) };
  }

  /** The 404 for a request whose MCP session's replica has just been found dead; undefined for any other. */
  ended(w: Workload, headers: IncomingHttpHeaders): ApiError | undefined {
    const session = first(headers[MCP_SESSION_HEADER]);
    if (!session) return undefined;
    const key = `${w.key}\n${session}`;
    const r = this.sessions.get(key, MCP_SESSION_TTL_MS);
    return r?.gone ? sessionEnded(session) : undefined;
  }

  /** Called with the replica's answer: an MCP session it opened is pinned to it, one it ended is forgotten. */
  answered(w: Workload, r: Replica, method: string | undefined, status: number, h: IncomingHttpHeaders) {
    const session = first(h[MCP_SESSION_HEADER]);
    if (!session) return;
    const key = `${w.key}\n${session}`;
    if (method === 'DELETE' && status < 300) this.sessions.delete(key);
    else if (status < 400) this.sessions.set(key, r, MCP_SESSION_TTL_MS);
  }
}

const sessionEnded = (session: string) =>
  new ApiError(
    'NOT_FOUND',
    `MCP session ${JSON.stringify(session)} has ended: the replica that held it is gone; start a new session (an initialize request without Mcp-Session-Id)`,
  );

/** The revision (primary or canary) named `revision`; the active one when it is neither any more. */
function owner(w: Workload, revision: string): Workload {
  return w.canary && w.canary.w.run.id === revision ? w.canary.w : w;
}
