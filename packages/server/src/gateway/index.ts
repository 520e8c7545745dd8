// The workload data plane: sandboxes (`/run/<ws>/sandboxes/<name>/...`, `sbx-<name>-<ws>.<region>.<inference_host>`)
// and their previews, agents and functions (their paths, hosts and trigger paths), and jobs' triggers. One pipeline
// for all, composed here in one visible order: address parsed once (parse-address.ts) → its kind's resolver
// (resolve.ts: the credential or preview token, and the target, or an answer of the gateway's own) → stream cap
// (streams.ts) → activator (hold/wake) → proxy or tunnel. One idle sweeper puts sandboxes and replicas back to sleep;
// the usage writer records sandboxes' run state. The gateway only reports what it sees of agents' and functions'
// load: the workload controller scales them (controllers/workload/scaler.ts).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/access.js';
import { ApiError } from '../errors.js';
import { rejectUpgrade, sendProblem } from '../http/problem.js';
import { wireErrorOf } from '../http/wire-error.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { HostLabelIndex } from '../store/host-labels.js';
import type { Resources } from '../store/resources.js';
import type { ResourceKey } from '../store/store.js';
import { Activator } from './activator.js';
import type { Admission, Forwarded } from './admission.js';
import { DriveMounts, isDriveMountPath } from './drive-mounts.js';
import { IdleSweeper } from './idle.js';
import { type JobTriggerAddress, type JobTriggerDeps, serveJobTrigger } from './job-trigger.js';
import { type Address, parseAddress } from './parse-address.js';
import { matchPort } from './ports.js';
import { PreviewHosts } from './previews.js';
import { type ForwardExtra, forward } from './proxy.js';
import { resolveAddress } from './resolve.js';
import { processStarter, type StartProcess } from './sandbox-call.js';
import { isLongLived, StreamCap } from './streams.js';
import { type Target, Targets } from './targets.js';
import { tunnel } from './upgrade.js';
import { UsageWriter } from './usage-writer.js';
import type { WorkloadAddress } from './workload-address.js';
import { WorkloadGateway, type WorkloadGatewayDeps } from './workloads.js';

export interface GatewayDeps {
  /** The HTTP server the API listens on; the gateway answers its data-plane requests before Fastify sees them. */
  server: Server;
  resources: Resources;
  driver: RuntimeDriver;
  authenticator: Authenticator;
  logger: Logger;
  standbyAfterS: number;
  inferenceHost?: string;
  /** Agents and functions (`/run/<ws>/agents|functions/<name>`, their hosts and trigger paths); none: the API's. */
  workloads?: Omit<WorkloadGatewayDeps, 'store' | 'authenticator' | 'logger' | 'activator' | 'resend'>;
  /** Jobs' HTTP triggers (`POST /run/<ws>/jobs/<name>`); none: the API's. */
  jobTriggers?: Omit<JobTriggerDeps, 'authenticator' | 'logger'>;
  /**
   * Told when a sandbox's daemon cannot be reached: it may have died (out of memory, say), and its controller
   * should look now rather than at its next periodic check.
   */
  onSandboxDown?: (key: ResourceKey) => void;
}

export interface Gateway {
  /** Epoch ms of a sandbox's last request as the gateway saw it (fresher than the stored lastUsedAt). */
  lastUsedMs(workspace: string, name: string): number | undefined;
  /** Starts a process in a sandbox for the server itself, waking it if needed (sandbox-call.ts). */
  startProcess: StartProcess;
  /** Sends a POST body to a deployed agent as a caller's request goes (its schedules). */
  invoke: WorkloadGateway['invoke'];
  close(): Promise<void>;
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/** Address kinds a WebSocket (or other) upgrade may reach: a tunnel to a sandbox's daemon or one of its ports. */
const TUNNELLED = new Set<Address['kind']>(['sandbox', 'sandbox-host', 'preview']);

export async function startGateway(deps: GatewayDeps): Promise<Gateway> {
  const { server, resources, driver, logger } = deps;
  const now = Date.now;
  const targets = new Targets({ store: resources.store, driver, logger, now });
  // The writer reads run state from the activator; the activator tells the writer when it changed.
  const usage = new UsageWriter({ resources, logger, now, run: (t) => activator.view(t) });
  const activator = new Activator({ driver, logger, now, onStateChange: (t) => usage.record(t) });
  const labels = new HostLabelIndex(resources.store);
  const previews = new PreviewHosts(labels, deps.inferenceHost);
  const streams = new StreamCap<Target>();
  const workloads =
    deps.workloads &&
    new WorkloadGateway({
      ...deps.workloads,
      store: resources.store,
      authenticator: deps.authenticator,
      logger,
      activator,
      resend: (req, res, admitted) => void pass(req, res, admitted),
    });
  const idle = new IdleSweeper({
    activator,
    usage,
    logger,
    now,
    standbyAfterMs: deps.standbyAfterS * 1000,
    // Read when a target is idle, by which time the runtime is open (it says so in the log when it cannot freeze).
    canFreeze: () => driver.capabilities.freezer,
    targets: function* () {
      yield* targets.values();
      if (workloads) yield* workloads.targets();
    },
  });
  await targets.start();
  await labels.start();
  idle.start();
  const tunnels = new Set<Duplex>();
  let closing = false;

  const parseCtx = {
    inferenceHost: deps.inferenceHost,
    previewOfHost: (host: string | undefined, url: string) => previews.match(host, url),
    labels,
  };
  const jobTriggers = deps.jobTriggers && {
    ...deps.jobTriggers,
    authenticator: deps.authenticator,
    logger,
  };
  const resolveDeps = {
    store: resources.store,
    targets,
    labels,
    authenticator: deps.authenticator,
    now,
    workloads: workloads && ((req: IncomingMessage, a: WorkloadAddress) => workloads.admit(req, a)),
    jobTrigger:
      jobTriggers &&
      ((req: IncomingMessage, a: JobTriggerAddress): Admission => ({
        answer: (res) => serveJobTrigger(jobTriggers, req, res, a),
      })),
  };
  /** Whether this gateway serves the address's kind (agents, functions and job triggers only when given). */
  const serves = (a: Address) =>
    a.kind === 'workload' ? !!workloads : a.kind === 'job-trigger' ? !!jobTriggers : true;

  /**
   * Lets a forwarded request in: a stream slot when it can last, then counted in by the activator (waiting while
   * the target wakes). `done` undoes the counting (and the resolver's own) once the request is over.
   */
  async function enter(req: IncomingMessage, f: Forwarded, upgrade: boolean): Promise<() => void> {
    const t = f.target;
    const release = isLongLived(req.method, f.path, upgrade) ? streams.acquire(t, t.key.name) : undefined;
    try {
      const wait = activator.enter(t);
      if (wait) await wait;
    } catch (err) {
      release?.();
      f.done?.();
      throw err;
    }
    return () => {
      activator.leave(t);
      release?.();
      f.done?.();
    };
  }

  /** A call to a sandbox's daemon (not to one of its ports) that finds no one listening reports the sandbox. */
  const reportingDown = (f: Forwarded): ForwardExtra => {
    const extra = f.extra ?? {};
    const down = deps.onSandboxDown;
    if (!down || f.target.key.kind !== 'Sandbox' || matchPort(f.path)) return extra;
    return {
      ...extra,
      onUnreachable: (err, sent) => {
        down(f.target.key);
        return extra.onUnreachable?.(err, sent);
      },
    };
  };

  const driveMounts = new DriveMounts({ store: resources.store, driver });
  const toWire = (err: unknown) => wireErrorOf(err, { log: logger, what: 'gateway error' });

  /** The pipeline after the resolver: the gateway's own answer, or the target entered and the request forwarded. */
  async function pass(req: IncomingMessage, res: ServerResponse, admitted: Promise<Admission>) {
    try {
      const a = await admitted;
      if ('answer' in a) return await a.answer(res);
      const done = await enter(req, a, false);
      if (!isDriveMountPath(a.path)) return forward(a.target, req, res, a.path, done, reportingDown(a));
      try {
        await driveMounts.serve(a.target, a.path, req, res);
      } finally {
        done();
      }
    } catch (err) {
      sendProblem(res, toWire(err), req.url?.split('?')[0]);
    }
  }

  const serve = (req: IncomingMessage, res: ServerResponse, a: Address) =>
    pass(
      req,
      res,
      closing
        ? Promise.reject(new ApiError('UNAVAILABLE', 'the server is shutting down'))
        : resolveAddress(a, req, resolveDeps),
    );

  // Data-plane requests are answered here, before Fastify routes or parses anything: bodies stream through
  // untouched, and the hot path costs no framework work (docs/decisions/009-sandbox-gateway-standby.md).
  const api = server.listeners('request')[0] as RequestListener | undefined;
  if (!api) throw new Error('the gateway must be started after the API created its HTTP server');
  server.removeListener('request', api);
  const onRequest: RequestListener = (req, res) => {
    const a = parseAddress(req, parseCtx);
    if (a && serves(a)) return void serve(req, res, a);
    api.call(server, req, res);
  };
  server.on('request', onRequest);

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const a = parseAddress(req, parseCtx);
    if (!a || !TUNNELLED.has(a.kind)) {
      // Nobody else takes upgrades on this server: say so instead of leaving the socket hanging.
      if (server.listenerCount('upgrade') === 1)
        rejectUpgrade(socket, new ApiError('NOT_FOUND', `no route for ${req.url}`));
      return;
    }
    (async () => {
      if (closing) throw new ApiError('UNAVAILABLE', 'the server is shutting down');
      const f = await resolveAddress(a, req, resolveDeps);
      if ('answer' in f) throw new ApiError('NOT_FOUND', `no route for ${req.url}`);
      const done = await enter(req, f, true);
      tunnel(f.target, req, socket, head, f.path, tunnels, done, f.extra);
    })().catch((err) => rejectUpgrade(socket, toWire(err), req.url?.split('?')[0]));
  };
  server.on('upgrade', onUpgrade);

  return {
    startProcess: processStarter(targets, activator),
    invoke: (ws, name, body, timeoutMs) =>
      workloads
        ? workloads.invoke(ws, name, body, timeoutMs)
        : Promise.resolve({ error: 'agents are not served by this gateway' }),
    lastUsedMs: (workspace, name) => {
      const t = targets.get(workspace, name);
      return t && activator.view(t).lastUsedMs;
    },
    async close() {
      closing = true;
      idle.stop();
      server.removeListener('upgrade', onUpgrade);
      for (const s of tunnels) s.destroy();
      await usage.drain();
      workloads?.stop();
      labels.close();
      await targets.close();
    },
  };
}
