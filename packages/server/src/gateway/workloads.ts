// Requests to agents and functions: the caller is checked (none needed for `public: true`), a replica is picked
// (one is started from zero while the request waits: the replica set shares ONE start among every waiting
// request), the activator thaws it if it is in standby, and the request is streamed both ways to its port.
// An idle replica goes to standby (frozen) after the standby delay and is removed after a longer idle; minScale
// replicas are never removed. Run state is kept by this file's own Activator, never written to the store.
import { OAUTH_REFRESH_FAILED, REFRESH_FAILED } from '../kinds/oauth2.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { Pool } from 'undici';
import type { Authenticator } from '../auth/access.js';
import { APP_PORT, type Replica, type ReplicaSet, type Workload } from '../controllers/replicas.js';
import { ApiError } from '../errors.js';
import { sendProblem } from '../http/problem.js';
import { wireErrorOf } from '../http/wire-error.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Store } from '../store/store.js';
import { Activator } from './activator.js';
import { Affinity, type Route } from './affinity.js';
import {
  decide,
  initialScaleState,
  type Sample,
  type ScaleState,
  STABLE_WINDOW_MS,
  TICK_MS,
} from './autoscaler.js';
import { authorize } from './auth.js';
import { type CallbackTarget, type Executions, MAX_OUTPUT_BYTES } from '../controllers/executions.js';
import { portPool } from './ports.js';
import { forward, upstreamHeaders } from './proxy.js';
import { ownPathRoute } from '../kinds/trigger-path.js';
import { RequestDeadlines } from './request-deadlines.js';
import type { Target } from './targets.js';
import type { WorkloadAddress } from './workload-address.js';

/** Requests in flight per replica before another is started (while under maxScale). */
export const TARGET_CONCURRENCY = 10;
/** Requests waiting for a replica to start, per workload; beyond it 429 (a flood must not grow without bound). */
export const MAX_WAITING = 1_000;
/** A replica idle (frozen) this long is removed: standby is warm, a removed one costs a cold start. */
export const REMOVE_AFTER_IDLE_MS = 5 * 60_000;
const SWEEP_MS = 1_000;

export interface WorkloadGatewayDeps {
  store: Store;
  replicas: ReplicaSet;
  driver: RuntimeDriver;
  authenticator: Authenticator;
  logger: Logger;
  standbyAfterMs: number;
  canFreeze: () => boolean;
  removeAfterMs?: number;
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
  private readonly activator: Activator;
  private readonly affinity: Affinity;
  private readonly deadlines: RequestDeadlines;
  private readonly targets = new WeakMap<Replica, Target>();
  private readonly waiting = new WeakMap<Workload, number>();
  private readonly now: () => number;
  private timer?: NodeJS.Timeout;
  private scaler?: NodeJS.Timeout;
  private readonly scaling = new WeakMap<Workload, { samples: Sample[]; state: ScaleState }>();

  constructor(private readonly deps: WorkloadGatewayDeps) {
    this.now = deps.now ?? Date.now;
    this.activator = new Activator({
      driver: deps.driver,
      logger: deps.logger,
      now: this.now,
      onStateChange: () => {},
    });
    this.affinity = new Affinity(this.now);
    this.deadlines = new RequestDeadlines({ idleMs: deps.idleTimeoutMs, now: this.now });
  }

  start() {
    this.timer = setInterval(
      () => void this.sweep(),
      Math.min(SWEEP_MS, Math.max(50, this.deps.standbyAfterMs / 4)),
    );
    this.timer.unref();
    this.scaler = setInterval(() => this.autoscale(), TICK_MS);
    this.scaler.unref();
  }

  stop() {
    clearInterval(this.timer);
    clearInterval(this.scaler);
    this.deadlines.stop();
  }

  /** One KPA tick per workload: sample the concurrency, decide, start what is missing (autoscaler.ts). */
  autoscale(): void {
    const now = this.now();
    for (const w of this.deps.replicas.all()) {
      let s = this.scaling.get(w);
      if (!s) {
        s = { samples: [], state: initialScaleState() };
        this.scaling.set(w, s);
      }
      const live = w.replicas.filter((r) => !r.gone);
      const concurrency = live.reduce((a, r) => a + r.inflight, 0) + (this.waiting.get(w) ?? 0);
      s.samples.push({ timeMs: now, concurrency });
      s.samples = s.samples.filter((x) => x.timeMs > now - STABLE_WINDOW_MS);
      const d = decide(
        { target: TARGET_CONCURRENCY, minScale: w.run.minScale, maxScale: w.run.maxScale },
        s.samples,
        live.length,
        now,
        s.state,
      );
      s.state = d.state;
      // Scale-in is the idle sweep's (standby first, removal later); the decision only adds replicas here.
      if (d.desired > live.length) {
        const started = this.deps.replicas.scaleOut(w, d.desired);
        if (started)
          this.deps.logger.info(
            { workload: w.key, desired: d.desired, ready: live.length, panicking: d.panicking },
            'scaling out',
          );
      }
    }
  }

  private targetOf(w: Workload, r: Replica): Target {
    let t = this.targets.get(r);
    if (!t) {
      const info = r.info;
      t = {
        key: { kind: w.kind, workspace: w.workspace, parent: '', name: w.name },
        id: r.id,
        conn: {
          socketPath: info.socketPath,
          address: info.address,
          ports: new Map(),
          pool: new Pool('http://replica', { socketPath: info.socketPath, connections: 1 }),
        },
        loaded: { frozen: false, lastUsedMs: r.lastUsedMs },
        status: 'DEPLOYED',
        get evicted() {
          return r.gone;
        },
      } as Target;
      this.targets.set(r, t);
    }
    return t;
  }

  /** Why a workload with no replica set entry does not serve: 404, or 503 naming its status. */
  private async notServing(a: WorkloadAddress): Promise<ApiError> {
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

  async serve(req: IncomingMessage, res: ServerResponse, addr: WorkloadAddress): Promise<void> {
    try {
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
      if (!w) throw await this.notServing(a);
      if (a.kind === 'Agent' && this.deps.executions && (tp?.async || isAsync(a.rest)))
        return await this.serveAsync(req, res, a, w, tp?.async ? tp.trigger : undefined);
      const sent = this.route(req, res, a, w, true);
      if (sent) await sent;
    } catch (err) {
      this.fail(req, res, err);
    }
  }

  private fail(req: IncomingMessage, res: ServerResponse, err: unknown) {
    sendProblem(
      res,
      wireErrorOf(err, { log: this.deps.logger, what: 'workload gateway error' }),
      req.url?.split('?')[0],
    );
  }

  /**
   * Picks the replica (thread or session pin, else a ready one, else one started) and forwards the request. A
   * promise only when something is waited for (a start, a thaw): the hot path makes none.
   */
  private route(
    req: IncomingMessage,
    res: ServerResponse,
    a: WorkloadAddress,
    w: Workload,
    mayRetry: boolean,
  ): Promise<void> | undefined {
    const route = this.affinity.route(w, req.headers, (x) => this.revisionFor(x));
    const r = route.replica ?? this.deps.replicas.ready(route.w, TARGET_CONCURRENCY);
    if (r) return this.send(req, res, a, w, route, r, mayRetry);
    return this.replicaFor(route.w).then((x) => this.send(req, res, a, w, route, x, mayRetry));
  }

  private send(
    req: IncomingMessage,
    res: ServerResponse,
    a: WorkloadAddress,
    w: Workload,
    route: Route,
    r: Replica,
    mayRetry: boolean,
  ): Promise<void> | undefined {
    route.pin?.(r);
    const t = this.targetOf(w, r);
    const wait = this.activator.enter(t);
    r.inflight++;
    r.lastUsedMs = this.now();
    const go = () => {
      const limits = this.deadlines.watch(req.socket, w.route?.timeoutS);
      forward(
        t,
        req,
        res,
        `/port/${APP_PORT}${a.rest}`,
        () => {
          limits.done();
          r.inflight--;
          r.lastUsedMs = this.now();
          this.activator.leave(t);
        },
        {
          signal: limits.signal,
          onResponse: (status, h) => this.affinity.answered(w, r, req.method, status, h),
          onUnreachable: (err, sent) => this.replicaDown(w, route.w, r, err, req.headers, sent),
          retry: mayRetry ? (err) => this.retryElsewhere(req, res, a, w, route.w, r, err) : undefined,
        },
      );
    };
    if (!wait) {
      go();
      return undefined;
    }
    return wait.then(go, (err) => {
      r.inflight--;
      throw err;
    });
  }

  /**
   * The replica's connection failed before any byte of the request was written (refused or reset at connect): it
   * is removed as dead and the request goes once more, to another ready replica or to one started for it (the
   * request waits as on a scale from zero). Only once: a second dead replica answers the 502. A request of an MCP
   * session the dead replica held gets the session's 404 instead (its state died with it).
   */
  private retryElsewhere(
    req: IncomingMessage,
    res: ServerResponse,
    a: WorkloadAddress,
    w: Workload,
    rev: Workload,
    r: Replica,
    err: Error & { code?: string },
  ): boolean {
    if (!RETRY_CODES.has(err.code ?? '')) return false;
    const ended = this.replicaDown(w, rev, r, err, req.headers, false, true);
    if (ended) this.fail(req, res, ended);
    else {
      try {
        this.route(req, res, a, w, false)?.catch((e) => this.fail(req, res, e));
      } catch (e) {
        this.fail(req, res, e);
      }
    }
    return true;
  }

  /**
   * A replica whose port refuses connections has lost its app (it exited, or its sandbox is gone): it is removed,
   * so the next pick, the threads pinned to it and the autoscaler's count move on (affinity.ts); a request of an MCP
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
   * outcome goes to the http-async trigger's callbackUrl, signed (controllers/executions.ts).
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
    if (!w) return { error: (await this.notServing({ kind: 'Agent', workspace, name, rest: '/' })).message };
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
    let r: Replica | undefined;
    let t: Target | undefined;
    const rev = this.revisionFor(w);
    let refused: (Error & { code?: string }) | undefined;
    try {
      r = await this.replicaFor(rev);
      t = this.targetOf(w, r);
      r.inflight++;
      const wait = this.activator.enter(t);
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
      // Refused at connect: nothing reached the replica, so the body goes once more, as a caller's request does.
      if (!(mayRetry && t && REPLICA_DOWN_CODES.has(e.code ?? ''))) return { error: e.message };
      refused = e;
    } finally {
      if (r && t) {
        r.inflight--;
        r.lastUsedMs = this.now();
        this.activator.leave(t);
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

  private async replicaFor(w: Workload): Promise<Replica> {
    const n = this.waiting.get(w) ?? 0;
    if (n >= MAX_WAITING)
      throw new ApiError(
        'RATE_LIMITED',
        `${n} requests already wait for ${JSON.stringify(w.name)} to start`,
        {
          headers: { 'retry-after': '1' },
        },
      );
    this.waiting.set(w, n + 1);
    try {
      return await this.deps.replicas.acquire(w, TARGET_CONCURRENCY);
    } finally {
      this.waiting.set(w, (this.waiting.get(w) ?? 1) - 1);
    }
  }

  /** Standby for idle replicas, removal for long-idle ones above minScale. */
  private async sweep(): Promise<void> {
    const now = this.now();
    const removeAfter = this.deps.removeAfterMs ?? REMOVE_AFTER_IDLE_MS;
    for (const w of this.deps.replicas.all()) {
      let live = w.replicas.filter((r) => !r.gone).length;
      for (const r of [...w.replicas]) {
        if (r.gone || r.inflight > 0) continue;
        const t = this.targetOf(w, r);
        const view = this.activator.view(t);
        if (view.inflight > 0 || view.transitioning) continue;
        const idle = now - Math.max(r.lastUsedMs, view.lastUsedMs);
        if (idle >= removeAfter && live > w.run.minScale) {
          live--;
          await this.deps.replicas.scaleIn(w, r);
        } else if (!view.frozen && idle >= this.deps.standbyAfterMs && this.deps.canFreeze())
          void this.activator.standby(t, async () => r.inflight === 0);
      }
    }
  }
}
