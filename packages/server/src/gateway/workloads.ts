// The resolver of agents and functions (resolve.ts): the caller is checked (none needed for `public: true`), a replica
// is picked (one is started from zero while the request waits: the replica set shares ONE start among every waiting
// request), and the request goes down the gateway's one pipeline to it (gateway/index.ts: the activator thaws it if
// it is in standby, the proxy streams both ways to its port). What the gateway sees is reported to the workload
// controller, which alone scales (controllers/workload/scaler.ts): requests in flight at each replica, requests
// waiting for one. Replicas' standby is the gateway's one idle mechanism (idle.ts), through `targets()`.
import { OAUTH_REFRESH_FAILED, REFRESH_FAILED } from '../kinds/oauth2.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/access.js';
import type { CallbackTarget, Executions } from '../controllers/workload/executions.js';
import { MAX_OUTPUT_BYTES } from '../controllers/workload/executions.js';
import {
  APP_PORT,
  portOf,
  type Replica,
  type ReplicaSet,
  type Workload,
} from '../controllers/workload/replicas.js';
import { TARGET_CONCURRENCY } from '../controllers/workload/scaler.js';
import { ApiError } from '../errors.js';
import { HOLDER_WAIT_MS, MAX_HOLDER_WAITING } from '../http/peer-forward.js';
import { isGone } from '../kinds/status.js';
import { ownPathRoute } from '../kinds/trigger-path.js';
import type { Store } from '../store/store.js';
import { type Activator, isWakeFailure } from './activator.js';
import type { Admission, Forwarded } from './admission.js';
import { Affinity, type Route } from './affinity.js';
import { authorize } from './auth.js';
import { portPool } from './ports.js';
import { upstreamHeaders } from './proxy.js';
import { RequestDeadlines } from './request-deadlines.js';
import { closeConnection, connectionTo, type Target } from './targets.js';
import type { WorkloadAddress } from './workload-address.js';

/** Requests waiting for a replica to start, per workload; beyond it 429 (a flood must not grow without bound). */
export const MAX_WAITING = 1_000;
/** Connections to a replica's daemon: the gateway asks it only whether a keepAlive process runs, before standby. */
const REPLICA_DAEMON_CONNECTIONS = 1;

export interface WorkloadGatewayDeps {
  store: Store;
  replicas: ReplicaSet;
  authenticator: Authenticator;
  logger: Logger;
  /** The gateway's one activator: replicas' run state beside sandboxes'. */
  activator: Activator;
  /** Sends a request again down the gateway's pipeline (to another replica, after the first refused it). */
  resend: (req: IncomingMessage, res: ServerResponse, admitted: Promise<Admission>) => void;
  now?: () => number;
  /** The canary draw (tests pass a seeded one). */
  random?: () => number;
  /** Asynchronous invocations (`?async=true`) and their callbacks. */
  executions?: Executions;
  /**
   * The agent's http-async trigger (the one of that id when the request came by its path; else the first with a
   * callbackUrl), secrets opened: where its callback goes.
   */
  asyncTrigger?: (
    workspace: string,
    name: string,
    triggerId?: string,
  ) => Promise<(CallbackTarget & { timeoutS?: number }) | undefined>;
  /** The management API's base URL, for an execution's status_url. */
  apiBase?: () => string;
  /** Idle limit of one request (request-deadlines.ts IDLE_TIMEOUT_MS unless set; tests shorten it). */
  idleTimeoutMs?: number;
}

/** Connection errors that mean nothing listens at the replica any more (not a slow or a closing app). */
const REPLICA_DOWN_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOENT']);
/** Errors before any byte of a request was written after which it is sent to another replica. */
const RETRY_CODES = new Set([...REPLICA_DOWN_CODES, 'ECONNRESET']);

/** How often a request waiting for a workload's replicas to come back looks (a map lookup). */
const COMING_BACK_POLL_MS = 100;

/** Longest an asynchronous invocation runs when its trigger sets no timeout (the service's 15 minutes). */
export const ASYNC_DEFAULT_TIMEOUT_S = 900;
/** Largest request body an asynchronous invocation takes (it is held until a replica takes it). */
export const ASYNC_MAX_BODY_BYTES = 1024 * 1024;

const isAsync = (rest: string) => /[?&]async=true(&|$)/.test(rest);
const withoutAsync = (rest: string) => {
  const [path, q = ''] = rest.split('?');
  const kept = q.split('&').filter((p) => p && p !== 'async=true');
  return kept.length ? `${path}?${kept.join('&')}` : path;
};

export class WorkloadGateway {
  private readonly affinity: Affinity;
  private readonly deadlines: RequestDeadlines;
  private readonly targetsOf = new Map<Replica, Target>();
  private readonly now: () => number;
  /** Requests waiting for a workload's replicas to come back (comingBack). */
  private comingBackWaiting = 0;

  constructor(private readonly deps: WorkloadGatewayDeps) {
    this.now = deps.now ?? Date.now;
    this.affinity = new Affinity(this.now);
    this.deadlines = new RequestDeadlines({ idleMs: deps.idleTimeoutMs, now: this.now });
  }

  stop() {
    this.deadlines.stop();
    for (const t of this.targetsOf.values()) closeConnection(t.conn, this.deps.logger, t.id);
    this.targetsOf.clear();
  }

  /** The targets of every live replica, for the one idle sweeper; those of replicas gone are dropped here. */
  *targets(): IterableIterator<Target> {
    for (const [r, t] of this.targetsOf)
      if (r.gone) {
        this.targetsOf.delete(r);
        closeConnection(t.conn, this.deps.logger, t.id);
      }
    for (const w of this.deps.replicas.all())
      for (const r of w.replicas) if (!r.gone) yield this.targetOf(w, r);
  }

  private targetOf(w: Pick<Workload, 'workspace' | 'kind' | 'name'>, r: Replica): Target {
    let t = this.targetsOf.get(r);
    if (!t) {
      t = {
        key: { kind: w.kind, workspace: w.workspace, parent: '', name: w.name },
        id: r.id,
        conn: connectionTo(r.info, REPLICA_DAEMON_CONNECTIONS),
        loaded: { frozen: false, lastUsedMs: r.lastUsedMs },
        status: 'DEPLOYED',
        get evicted() {
          return r.gone;
        },
        recordsUsage: false,
      };
      this.targetsOf.set(r, t);
    }
    return t;
  }

  /**
   * Freezes an idle replica the scaler keeps at scale to zero (controllers/workload/idle-standby.ts) through the one
   * activator, as the idle sweeper freezes any target, so the next request wakes it on the same path: true once it is
   * frozen (or was already), false when a request called the freeze off or it failed.
   */
  async standbyReplica(w: Pick<Workload, 'workspace' | 'kind' | 'name'>, r: Replica): Promise<boolean> {
    if (r.gone) return false;
    const t = this.targetOf(w, r);
    if (this.deps.activator.view(t).frozen) return true;
    return this.deps.activator.standby(t, async () => r.inflight === 0);
  }

  /**
   * Whether a workload with no replica set entry got one within HOLDER_WAIT_MS: only one that was deployed (it has an
   * active revision) and still runs (enabled, not failed, not deleted), whose replicas a new leader's deploy starts
   * again after a failover (or a server's after its restart) — a first deploy still building is answered 503 at once.
   */
  private async comingBack(req: IncomingMessage, a: Pick<WorkloadAddress, 'kind' | 'workspace' | 'name'>) {
    const o = await this.deps.store.get({ kind: a.kind, workspace: a.workspace, parent: '', name: a.name });
    if (!o?.body.activeRevision || isGone(o) || o.body.spec?.enabled === false || o.body.status === 'FAILED')
      return false;
    if (this.comingBackWaiting >= MAX_HOLDER_WAITING) return false;
    this.comingBackWaiting++;
    try {
      const deadline = this.now() + HOLDER_WAIT_MS;
      while (!this.deps.replicas.get(a.workspace, a.kind, a.name)) {
        if (this.now() >= deadline || req.socket.destroyed) return false;
        await new Promise((r) => setTimeout(r, COMING_BACK_POLL_MS));
      }
      return true;
    } finally {
      this.comingBackWaiting--;
    }
  }

  /** Why a workload with no replica set entry does not serve: 404, or 503 naming its status. */
  private async notServing(a: Pick<WorkloadAddress, 'kind' | 'workspace' | 'name'>): Promise<ApiError> {
    const o = await this.deps.store.get({ kind: a.kind, workspace: a.workspace, parent: '', name: a.name });
    const what = `${a.kind.toLowerCase()} ${JSON.stringify(a.name)}`;
    if (!o) return new ApiError('NOT_FOUND', `${what} not found in workspace ${a.workspace}`);
    const status = o.body.status;
    const last = (o.body.events ?? []).at(-1)?.message ?? '';
    const why =
      status === 'FAILED'
        ? `failed: ${last.split('\n')[0]}`
        : status === 'DEACTIVATED' || status === 'DEACTIVATING'
          ? 'deactivated (spec.enabled is false)'
          : `not deployed yet (status ${status})`;
    // An OAuth2 connection's grant refused (§7): nothing changes until the user connects again, so no Retry-After.
    if (status === 'FAILED' && last.startsWith(REFRESH_FAILED))
      return new ApiError('UNAVAILABLE', `${what} is ${why}`, { code: OAUTH_REFRESH_FAILED });
    return new ApiError('UNAVAILABLE', `${what} is ${why}`, { headers: { 'retry-after': '1' } });
  }

  /** Lets a request to an agent or function in: its caller checked, then the replica it goes to, or its 202. */
  async admit(req: IncomingMessage, addr: WorkloadAddress): Promise<Admission> {
    let a = addr;
    const w = this.deps.replicas.get(a.workspace, a.kind, a.name);
    let tp = a.path === undefined ? undefined : w?.route?.paths?.[a.path];
    const own = a.path === undefined ? w?.route?.ownPaths : undefined;
    if (own) {
      // A trigger path under the own address (`agents/<name>/async`): the app sees what follows it.
      const m = ownPathRoute(own, a.rest);
      if (m) {
        tp = m.route;
        a = { ...a, rest: a.rest.slice(m.sub.length) || '/' };
        if (a.rest.startsWith('?')) a.rest = `/${a.rest}`;
      }
    }
    // A trigger path's own authenticationType wins over spec.public there (kinds/trigger-path.ts).
    if (!(tp?.public ?? w?.public))
      await authorize(this.deps.authenticator, req.headers, a.workspace, a.unnamed);
    if (!w) {
      // Deployed, but no replica here yet: this server just took the lead (or started) and its deploy is starting
      // one. The request waits for it, then is admitted anew (its workload's routes now known).
      if (await this.comingBack(req, a)) return this.admit(req, addr);
      throw await this.notServing(a);
    }
    if (a.kind === 'Agent' && this.deps.executions && (tp?.async || isAsync(a.rest))) {
      const triggerId = tp?.async ? tp.trigger : undefined;
      const to = a;
      return { answer: (res) => this.serveAsync(req, res, to, w, triggerId) };
    }
    return this.route(req, a, w, true);
  }

  /**
   * The replica a request goes to (thread or session pin, else a ready one, else one started) and how: the request
   * counted in it, its deadline, its retry on another replica when this one refuses it before reading anything.
   */
  private async route(
    req: IncomingMessage,
    a: WorkloadAddress,
    w: Workload,
    mayRetry: boolean,
  ): Promise<Forwarded> {
    const route = this.affinity.route(w, req.headers, (x) => this.revisionFor(x));
    const r =
      route.replica ??
      this.deps.replicas.ready(route.w, TARGET_CONCURRENCY) ??
      (await this.replicaFor(route.w));
    route.pin?.(r);
    r.inflight++;
    r.lastUsedMs = this.now();
    const limits = this.deadlines.watch(req.socket, w.route?.timeoutS);
    return {
      target: this.targetOf(w, r),
      path: `/port/${portOf(route.w.run)}${a.rest}`,
      extra: {
        cut: limits.cut,
        onResponse: (status, h) => this.affinity.answered(w, r, req.method, status, h),
        onUnreachable: (err, sent) => this.replicaDown(w, route.w, r, err, req.headers, sent),
        retry: mayRetry ? (err, res) => this.retryElsewhere(req, a, w, route, r, err, res) : undefined,
        wakeFailed: (err, res) => this.wakeFailed(req, a, w, route.w, r, err, res, mayRetry),
      },
      done: () => {
        limits.done();
        r.inflight--;
        r.lastUsedMs = this.now();
      },
    };
  }

  /**
   * The replica's connection failed before any byte of the request was written (refused or reset at connect): it
   * is removed as dead and the request goes once more, to another ready replica or to one started for it (the
   * request waits as on a scale from zero). Only once: a second dead replica answers the 502. A request of an MCP
   * session the dead replica held gets the session's 404 instead (its state died with it).
   */
  private retryElsewhere(
    req: IncomingMessage,
    a: WorkloadAddress,
    w: Workload,
    route: Route,
    r: Replica,
    err: Error & { code?: string },
    res: ServerResponse,
  ): boolean {
    if (!RETRY_CODES.has(err.code ?? '')) return false;
    const ended = this.replicaDown(w, route.w, r, err, req.headers, false, true);
    this.deps.resend(req, res, ended ? Promise.reject(ended) : this.route(req, a, w, false));
    return true;
  }

  /**
   * A replica whose thaw failed (its sandbox went from under the runtime while frozen, say a kept replica at scale to
   * zero) would fail every request sent to it: it is removed, and the request goes once more as in retryElsewhere.
   */
  private wakeFailed(
    req: IncomingMessage,
    a: WorkloadAddress,
    w: Workload,
    rev: Workload,
    r: Replica,
    err: Error,
    res: ServerResponse,
    mayRetry: boolean,
  ): boolean {
    if (!isWakeFailure(err)) return false;
    if (!r.gone) {
      this.deps.logger.warn(
        { workload: rev.key, replica: r.id, err: err.message },
        'replica could not be woken: removed',
      );
      void this.deps.replicas.crashed(rev, r);
    }
    if (!mayRetry) return false;
    const ended = this.affinity.ended(w, req.headers);
    this.deps.resend(req, res, ended ? Promise.reject(ended) : this.route(req, a, w, false));
    return true;
  }

  /**
   * A replica whose port refuses connections has lost its app (it exited, or its sandbox is gone): it is removed,
   * so the next pick, the threads pinned to it and the scaler's count move on (affinity.ts); a request of an MCP
   * session it held gets the session's 404 instead of a 502. Other failures leave it in place.
   */
  private replicaDown(
    w: Workload,
    rev: Workload,
    r: Replica,
    err: Error & { code?: string },
    headers: IncomingMessage['headers'],
    sent: boolean,
    retrying = false,
  ): ApiError | undefined {
    // A reset before the request was written is a connect that failed; after it, a live app may close a connection.
    const down = REPLICA_DOWN_CODES.has(err.code ?? '') || (!sent && err.code === 'ECONNRESET');
    if (down && !r.gone) {
      this.deps.logger.warn(
        { workload: rev.key, replica: r.id, code: err.code, retrying },
        'replica unreachable: removed',
      );
      void this.deps.replicas.crashed(rev, r);
    }
    if (down) return this.affinity.ended(w, headers);
    if (!sent) return undefined;
    const what = `${w.kind.toLowerCase()} ${JSON.stringify(w.name)}`;
    return new ApiError(
      'BAD_GATEWAY',
      `the replica of ${what} failed after the request was sent to it (${err.code ?? err.message}); it was not retried, since the replica may have acted on it`,
    );
  }

  /**
   * `?async=true`: 202 at once with the execution's id and status URL; the request runs in the background and its
   * outcome goes to the http-async trigger's callbackUrl, signed (controllers/workload/executions.ts).
   */
  private async serveAsync(
    req: IncomingMessage,
    res: ServerResponse,
    a: WorkloadAddress,
    w: Workload,
    triggerId?: string,
  ) {
    const ex = this.deps.executions as Executions;
    const trigger = await this.deps.asyncTrigger?.(a.workspace, a.name, triggerId);
    if (trigger) {
      const refused = await ex.refusal(trigger.url);
      if (refused) throw new ApiError('POLICY_DENIED', refused);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > ASYNC_MAX_BODY_BYTES)
        throw new ApiError(
          'PAYLOAD_TOO_LARGE',
          `an asynchronous request body is at most ${ASYNC_MAX_BODY_BYTES} bytes`,
        );
      chunks.push(c as Buffer);
    }
    const headers = upstreamHeaders(req);
    const e = ex.start(a.workspace, a.name);
    const statusUrl = `${this.deps.apiBase?.() ?? ''}/v0/agents/${a.name}/executions/${e.id}`;
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: e.id, status: e.status, status_url: statusUrl }));
    const timeoutMs = (trigger?.timeoutS ?? ASYNC_DEFAULT_TIMEOUT_S) * 1000;
    void this.runAsync(
      w,
      withoutAsync(a.rest),
      req.method ?? 'POST',
      headers,
      Buffer.concat(chunks),
      timeoutMs,
    ).then((outcome) => ex.finish(e, outcome, trigger));
  }

  /**
   * Sends one POST body to a deployed agent the way a caller's request goes (replica choice, scale from zero,
   * canary share), for schedule triggers: answers the status code, or why it could not be sent.
   */
  async invoke(
    workspace: string,
    name: string,
    body: Buffer,
    timeoutMs = ASYNC_DEFAULT_TIMEOUT_S * 1000,
  ): Promise<{ statusCode?: number; error?: string }> {
    const w = this.deps.replicas.get(workspace, 'Agent', name);
    if (!w) return { error: (await this.notServing({ kind: 'Agent', workspace, name })).message };
    const out = await this.runAsync(w, '/', 'POST', { 'content-type': 'application/json' }, body, timeoutMs);
    return { statusCode: out.statusCode, error: out.error };
  }

  private async runAsync(
    w: Workload,
    path: string,
    method: string,
    headers: Record<string, string | string[]>,
    body: Buffer,
    timeoutMs: number,
    mayRetry = true,
  ): Promise<{ statusCode?: number; output?: string; error?: string }> {
    const { activator } = this.deps;
    let r: Replica | undefined;
    let t: Target | undefined;
    const rev = this.revisionFor(w);
    let refused: (Error & { code?: string }) | undefined;
    try {
      r = await this.replicaFor(rev);
      t = this.targetOf(w, r);
      r.inflight++;
      const wait = activator.enter(t);
      if (wait) await wait;
      const answer = await portPool(t, APP_PORT).request({
        path,
        method: method as 'POST',
        headers: { ...headers, host: `localhost:${APP_PORT}`, 'content-length': String(body.length) },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      let out = '';
      for await (const c of answer.body) {
        if (out.length < MAX_OUTPUT_BYTES) out += (c as Buffer).toString('utf8');
      }
      return { statusCode: answer.statusCode, output: out.slice(0, MAX_OUTPUT_BYTES) };
    } catch (err) {
      const e = err as Error & { code?: string };
      const unwakeable = isWakeFailure(e);
      if (unwakeable && r && !r.gone) void this.deps.replicas.crashed(rev, r);
      // Refused at connect (or never woken): nothing reached the replica, so the body goes once more, as a caller's
      // request does.
      if (!(mayRetry && t && (unwakeable || REPLICA_DOWN_CODES.has(e.code ?? ''))))
        return { error: e.message };
      refused = e;
    } finally {
      if (r && t) {
        r.inflight--;
        r.lastUsedMs = this.now();
        activator.leave(t);
      }
    }
    if (r) this.replicaDown(w, rev, r, refused, {}, false, true);
    return this.runAsync(w, path, method, headers, body, timeoutMs, false);
  }

  /** The canary takes its percent of requests, drawn per request (weighted random, as Knative's split). */
  private revisionFor(w: Workload): Workload {
    const c = w.canary;
    return c && (this.deps.random ?? Math.random)() * 100 < c.percent ? c.w : w;
  }

  /** A replica for a request that found none ready: one is started (counted as waiting for the scaler meanwhile). */
  private async replicaFor(w: Workload): Promise<Replica> {
    if (w.waiting >= MAX_WAITING)
      throw new ApiError(
        'RATE_LIMITED',
        `${w.waiting} requests already wait for ${JSON.stringify(w.name)} to start`,
        {
          headers: { 'retry-after': '1' },
        },
      );
    w.waiting++;
    try {
      return await this.deps.replicas.acquire(w, TARGET_CONCURRENCY);
    } finally {
      w.waiting--;
    }
  }
}
