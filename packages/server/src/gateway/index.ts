// The workload data plane: sandboxes (`/run/<ws>/sandboxes/<name>/...`, `sbx-<name>-<ws>.<region>.<inference_host>`)
// and their previews, agents and functions (their paths, hosts and trigger paths), and jobs' triggers. Composed
// here: each request's address parsed once (parse-address.ts), then one pipeline for all (pipeline.ts: its kind's
// resolver → stream cap → activator → proxy or tunnel). One idle sweeper puts sandboxes and replicas back to sleep;
// the usage writer records sandboxes' run state. The gateway only reports what it sees of agents' and functions'
// load: the workload controller scales them (controllers/workload/scaler.ts).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/access.js';
import { ApiError } from '../errors.js';
import { rejectUpgrade, sendProblem } from '../http/problem.js';
import { THREAD_HEADERS } from './affinity.js';
import {
  type Avoided,
  forwardedAlready,
  sendToHolder,
  forwardUpgradeToPeer,
  type Holder,
  type HolderDecision,
} from '../http/peer-forward.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { HostLabelIndex } from '../store/host-labels.js';
import type { Resources } from '../store/resources.js';
import type { ResourceKey, StoredObject } from '../store/store.js';
import { Activator } from './activator.js';
import type { Admission } from './admission.js';
import { DriveMounts } from './drive-mounts.js';
import { IdleSweeper } from './idle.js';
import { type JobTriggerAddress, type JobTriggerDeps, serveJobTrigger } from './job-trigger.js';
import { type Address, parseAddress } from './parse-address.js';
import { Pipeline } from './pipeline.js';
import { PreviewHosts } from './previews.js';
import { processStarter, type StartProcess } from './sandbox-call.js';
import { StreamCap } from './streams.js';
import { type Target, Targets } from './targets.js';
import { liftWsCredential } from './ws-credential.js';
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
  /**
   * In a cluster: which server holds the instances, and this server's node id. A data-plane request this server does
   * not hold the instances for is sent there (peer.ts); absent, every request is served here.
   */
  holder?: Holder;
  /** Whether this node runs a sandbox (in a cluster, the one it is placed on); default every one. */
  runsHere?: (o: StoredObject) => boolean;
  /** In a cluster, whether this node holds its lease: without it, it serves none of its sandboxes (decision 064). */
  holding?: () => boolean;
}

export interface Gateway {
  /** Epoch ms of a sandbox's last request as the gateway saw it (fresher than the stored lastUsedAt). */
  lastUsedMs(workspace: string, name: string): number | undefined;
  /** Starts a process in a sandbox for the server itself, waking it if needed (sandbox-call.ts). */
  startProcess: StartProcess;
  /** Sends a POST body to a deployed agent as a caller's request goes (its schedules). */
  invoke: WorkloadGateway['invoke'];
  /** Freezes a replica kept at scale to zero (decision 090); false where this host cannot freeze. */
  standbyReplica: WorkloadGateway['standbyReplica'];
  /** This node lost its lease (decision 064): no request reaches its sandboxes' instances until it holds them again. */
  forgetSandboxes(): void;
  close(): Promise<void>;
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

const HERE: HolderDecision = { here: true };
const NONE: Avoided = { has: () => false };
/** On an agent's or function's answer in a cluster: the node whose replica served it. */
export const NODE_HEADER = 'x-berth-node';

/** A request's thread id (affinity.ts's headers), which keeps its replica, and so its node. */
function threadOf(headers: IncomingMessage['headers']): string | undefined {
  for (const h of THREAD_HEADERS) {
    const v = headers[h];
    if (typeof v === 'string' && v) return v;
  }
  return undefined;
}

/** The sandbox an address reaches, as far as its form says (a label not in the table: none). */
function sandboxOfAddress(
  a: Address,
  labels: HostLabelIndex,
): { workspace: string; name: string } | undefined {
  if (a.kind === 'sandbox') return a;
  if (a.kind === 'preview') return { workspace: a.preview.workspace, name: a.preview.sandbox };
  if (a.kind === 'sandbox-host') {
    const owner = labels.resolve(a.label);
    return owner?.kind === 'Sandbox' ? owner : undefined;
  }
  return undefined;
}

/** Address kinds a WebSocket (or other) upgrade may reach: a tunnel to a sandbox's daemon or one of its ports. */
const TUNNELLED = new Set<Address['kind']>(['sandbox', 'sandbox-host', 'preview']);

export async function startGateway(deps: GatewayDeps): Promise<Gateway> {
  const { server, resources, driver, logger } = deps;
  const now = Date.now;
  const targets = new Targets({
    store: resources.store,
    driver,
    logger,
    now,
    runsHere: deps.runsHere,
    holding: deps.holding,
  });
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
      resend: (req, res, admitted) => void pipeline.pass(req, res, admitted),
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
      // The table holds only the sandboxes this node runs (the runtime here has no other); the replica set only the
      // replicas this node runs (placed here, or the leader's), which no other server freezes.
      yield* targets.values();
      if (workloads) yield* workloads.targets();
    },
  });
  await targets.start();
  await labels.start();
  idle.start();

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

  const pipeline = new Pipeline({
    activator,
    streams,
    driveMounts: new DriveMounts({ store: resources.store, driver }),
    resolve: resolveDeps,
    logger,
    onSandboxDown: deps.onSandboxDown,
  });

  // Data-plane requests are answered here, before Fastify routes or parses anything: bodies stream through
  // untouched, and the hot path costs no framework work (docs/decisions/009-sandbox-gateway-standby.md).
  const api = server.listeners('request')[0] as RequestListener | undefined;
  if (!api) throw new Error('the gateway must be started after the API created its HTTP server');
  server.removeListener('request', api);
  /**
   * Where a data-plane request is served: a sandbox's on the node it is placed on, any other on the server holding
   * the controllers' instances; here on SQLite (one sent on by a peer is served here too).
   */
  const where = (req: IncomingMessage, a: Address, avoid: Avoided = NONE): HolderDecision => {
    const h = deps.holder;
    if (!h || forwardedAlready(req)) return HERE;
    if (a.kind === 'workload' && h.decideReplica) {
      const w = a.workload;
      // A function's MCP sessions live in one replica's memory: every server sends its requests to the same node.
      const sticky = w.kind === 'Function' ? w.name : threadOf(req.headers);
      const d = h.decideReplica(w.kind, w.workspace, w.name, avoid, sticky);
      if (d) return d;
    }
    const s = sandboxOfAddress(a, labels);
    return s ? h.decideSandbox(s.workspace, s.name) : h.decide();
  };
  const onRequest: RequestListener = (req, res) => {
    const a = parseAddress(req, parseCtx);
    if (a && serves(a)) {
      const h = deps.holder;
      if (!h) return void pipeline.serve(req, res, a);
      if ('here' in where(req, a)) {
        // Which node's replica answered an agent or function: what an operator (and the cluster tests) look at.
        if (a.kind === 'workload') res.setHeader(NODE_HEADER, h.self);
        return void pipeline.serve(req, res, a);
      }
      // Sent on; what the leader holds (not a sandbox) waits out a failover (peer-forward.ts).
      const wait = !sandboxOfAddress(a, labels);
      return void sendToHolder(req, res, h, (avoid) => where(req, a, avoid), wait).then((w) => {
        if (w === 'here') {
          if (a.kind === 'workload') res.setHeader(NODE_HEADER, h.self);
          void pipeline.serve(req, res, a);
        } else if (w instanceof ApiError) sendProblem(res, w, req.url);
      });
    }
    api.call(server, req, res);
  };
  server.on('request', onRequest);

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    liftWsCredential(req);
    const a = parseAddress(req, parseCtx);
    if (!a || !TUNNELLED.has(a.kind)) {
      // Nobody else takes upgrades on this server: say so instead of leaving the socket hanging.
      if (server.listenerCount('upgrade') === 1)
        rejectUpgrade(socket, new ApiError('NOT_FOUND', `no route for ${req.url}`));
      return;
    }
    const w = where(req, a);
    if ('peer' in w) return forwardUpgradeToPeer(req, socket, head, w.peer, deps.holder?.self ?? '');
    if ('unavailable' in w) return rejectUpgrade(socket, new ApiError('UNAVAILABLE', w.unavailable));
    pipeline.upgrade(req, socket, head, a);
  };
  server.on('upgrade', onUpgrade);

  return {
    startProcess: processStarter(targets, activator),
    invoke: (ws, name, body, timeoutMs) =>
      workloads
        ? workloads.invoke(ws, name, body, timeoutMs)
        : Promise.resolve({ error: 'agents are not served by this gateway' }),
    // Without a freezer a kept replica would hold its memory awake: the scaler then removes it, as before.
    standbyReplica: async (w, r) =>
      workloads !== undefined && driver.capabilities.freezer && workloads.standbyReplica(w, r),
    forgetSandboxes: () => targets.evictAll(),
    lastUsedMs: (workspace, name) => {
      const t = targets.get(workspace, name);
      return t && activator.view(t).lastUsedMs;
    },
    async close() {
      pipeline.close();
      idle.stop();
      server.removeListener('upgrade', onUpgrade);
      await usage.drain();
      workloads?.stop();
      labels.close();
      await targets.close();
    },
  };
}
