// The workload data plane: `/run/<ws>/sandboxes/<name>/...` and `sbx-<name>-<ws>.<region>.<inference_host>`
// reach the sandbox's own API daemon, and its previews (previews.ts) one of its ports, resuming it from standby
// first; agents, functions and jobs' triggers have their own servers. Which address form a request uses is decided
// once, by address-forms.ts `classify`. Composed here in one visible order: address parsed once → credential or preview
// token and table entry (resolve.ts) → stream cap (streams.ts) → activator (hold/wake) → proxy or tunnel; the
// idle sweeper puts sandboxes back to sleep and the usage writer records it.
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
import { type SandboxCall, sandboxCaller } from './sandbox-call.js';
import { DriveMounts, isDriveMountPath } from './drive-mounts.js';
import { IdleSweeper } from './idle.js';
import { type Address, parseAddress } from './parse-address.js';
import { PreviewHosts } from './previews.js';
import { type ForwardExtra, forward } from './proxy.js';
import { matchPort } from './ports.js';
import { type Admission, resolveAddress } from './resolve.js';
import { isLongLived, StreamCap } from './streams.js';
import { type Target, Targets } from './targets.js';
import { tunnel } from './upgrade.js';
import { liftWsCredential } from './ws-credential.js';
import { UsageWriter } from './usage-writer.js';
import { type JobTriggerDeps, serveJobTrigger } from './job-trigger.js';
import { classify } from './address-forms.js';
import type { WorkloadGateway } from './workloads.js';

export interface GatewayDeps {
  /** The HTTP server the API listens on; the gateway answers its sandbox requests before Fastify sees them. */
  server: Server;
  resources: Resources;
  driver: RuntimeDriver;
  authenticator: Authenticator;
  logger: Logger;
  standbyAfterS: number;
  inferenceHost?: string;
  /** Agents and functions (`/run/<ws>/agents|functions/<name>`), answered before any sandbox address. */
  workloads?: WorkloadGateway;
  /** Jobs' HTTP triggers (`POST /run/<ws>/jobs/<name>`). */
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
  /** A call the server itself makes to a sandbox's API, waking it if needed (sandbox-call.ts). */
  callSandbox: SandboxCall;
  close(): Promise<void>;
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

export async function startGateway(deps: GatewayDeps): Promise<Gateway> {
  const { server, resources, driver, logger } = deps;
  const now = Date.now;
  const targets = new Targets({ store: resources.store, driver, logger, now });
  // The writer reads run state from the activator; the activator tells the writer when it changed.
  const usage = new UsageWriter({ resources, logger, now, run: (t) => activator.view(t) });
  const activator = new Activator({ driver, logger, now, onStateChange: (t) => usage.record(t) });
  const idle = new IdleSweeper({
    activator,
    usage,
    logger,
    now,
    standbyAfterMs: deps.standbyAfterS * 1000,
    // Read when a sandbox is idle, by which time the runtime is open (it says so in the log when it cannot freeze).
    canFreeze: () => driver.capabilities.freezer,
    targets: () => targets.values(),
  });
  const labels = new HostLabelIndex(resources.store);
  const previews = new PreviewHosts(labels, deps.inferenceHost);
  const streams = new StreamCap<Target>();
  await targets.start();
  await labels.start();
  idle.start();
  const tunnels = new Set<Duplex>();
  let closing = false;

  const parseCtx = {
    inferenceHost: deps.inferenceHost,
    previewOfHost: (host: string | undefined, url: string) => previews.match(host, url),
  };
  const resolveDeps = { store: resources.store, targets, labels, authenticator: deps.authenticator, now };

  /**
   * Lets the request in: the caller and the target (resolve.ts), a stream slot when it can last, then counted
   * in by the activator (waiting while the sandbox wakes). `done` undoes the counting once the request is over.
   */
  async function admit(
    req: IncomingMessage,
    a: Address,
    upgrade: boolean,
  ): Promise<Admission & { done: () => void }> {
    if (closing) throw new ApiError('UNAVAILABLE', 'the server is shutting down');
    const admitted = await resolveAddress(a, req, resolveDeps);
    const t = admitted.target;
    const release = isLongLived(req.method, admitted.path, upgrade)
      ? streams.acquire(t, t.key.name)
      : undefined;
    try {
      const wait = activator.enter(t);
      if (wait) await wait;
    } catch (err) {
      release?.();
      throw err;
    }
    return {
      ...admitted,
      done: () => {
        activator.leave(t);
        release?.();
      },
    };
  }

  /** A call to the daemon (not to one of the sandbox's ports) that finds no one listening reports the sandbox. */
  const reportingDown = (t: Target, path: string, extra: ForwardExtra = {}): ForwardExtra => {
    const down = deps.onSandboxDown;
    if (!down || matchPort(path)) return extra;
    return {
      ...extra,
      onUnreachable: (err, sent) => {
        down(t.key);
        return extra.onUnreachable?.(err, sent);
      },
    };
  };

  const driveMounts = new DriveMounts({ store: resources.store, driver });
  const toWire = (err: unknown) => wireErrorOf(err, { log: logger, what: 'sandbox gateway error' });

  const serve = async (req: IncomingMessage, res: ServerResponse, a: Address) => {
    try {
      const { target, path, extra, done } = await admit(req, a, false);
      if (!isDriveMountPath(path))
        return forward(target, req, res, path, done, reportingDown(target, path, extra));
      try {
        await driveMounts.serve(target, path, req, res);
      } finally {
        done();
      }
    } catch (err) {
      sendProblem(res, toWire(err), req.url?.split('?')[0]);
    }
  };

  // Data-plane requests are answered here, before Fastify routes or parses anything: bodies stream through
  // untouched, and the hot path costs no framework work (docs/decisions/009-sandbox-gateway-standby.md).
  const api = server.listeners('request')[0] as RequestListener | undefined;
  if (!api) throw new Error('the gateway must be started after the API created its HTTP server');
  server.removeListener('request', api);
  const classifyCtx = { ...parseCtx, labels };
  const onRequest: RequestListener = (req, res) => {
    const route = classify(req, classifyCtx);
    switch (route?.form) {
      case undefined:
        break;
      case 'agent-host':
      case 'function-host':
      case 'agent-path':
      case 'function-path':
      case 'trigger-path':
        if (!deps.workloads) break;
        return void deps.workloads.serve(req, res, route.workload);
      case 'job-trigger':
        if (!deps.jobTriggers) break;
        return void serveJobTrigger(
          { ...deps.jobTriggers, authenticator: deps.authenticator, logger },
          req,
          res,
          route.job,
        );
      case 'sandbox-path':
      case 'sandbox-host':
      case 'preview-path':
      case 'preview-host':
        return void serve(req, res, route.address);
      default:
        route satisfies never;
    }
    api.call(server, req, res);
  };
  server.on('request', onRequest);

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    liftWsCredential(req);
    const a = parseAddress(req, parseCtx);
    if (!a) {
      // Nobody else takes upgrades on this server: say so instead of leaving the socket hanging.
      if (server.listenerCount('upgrade') === 1)
        rejectUpgrade(socket, new ApiError('NOT_FOUND', `no route for ${req.url}`));
      return;
    }
    admit(req, a, true).then(
      ({ target, path, extra, done }) => tunnel(target, req, socket, head, path, tunnels, done, extra),
      (err) => {
        rejectUpgrade(socket, toWire(err), req.url?.split('?')[0]);
      },
    );
  };
  server.on('upgrade', onUpgrade);

  return {
    callSandbox: sandboxCaller(targets, activator),
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
      labels.close();
      await targets.close();
    },
  };
}
