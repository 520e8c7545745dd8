// The data plane for sandboxes: `/run/<ws>/sandboxes/<name>/...` and `sbx-<name>-<ws>.<region>.<inference_host>`
// reach the sandbox's own API daemon, and its previews (previews.ts) one of its ports, resuming it from standby
// first. Composed here in one visible order: address → credential (or preview token) → target (Map) →
// activator (hold/wake) → proxy or tunnel; idle sweeps put it back to sleep.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { ApiError } from '../errors.js';
import type { Authenticator } from '../auth/access.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { Resources } from '../store/resources.js';
import { Activator } from './activator.js';
import { labelSplits, matchPreviewPath, matchSandboxHost, matchSandboxPath } from './address.js';
import { authorize } from './auth.js';
import { IdleSweeper } from './idle.js';
import { rejectUpgrade, sendProblem } from '../http/problem.js';
import { wireErrorOf } from '../http/wire-error.js';
import { admitPreview, PreviewHosts } from './previews.js';
import { type ForwardExtra, forward } from './proxy.js';
import { type Target, Targets } from './targets.js';
import { tunnel } from './upgrade.js';

export interface GatewayDeps {
  /** The HTTP server the API listens on; the gateway answers its sandbox requests before Fastify sees them. */
  server: Server;
  resources: Resources;
  driver: RuntimeDriver;
  authenticator: Authenticator;
  logger: Logger;
  standbyAfterS: number;
  inferenceHost?: string;
}

export interface Gateway {
  /** Epoch ms of a sandbox's last request as the gateway saw it (fresher than the stored lastUsedAt). */
  lastUsedMs(workspace: string, name: string): number | undefined;
  close(): Promise<void>;
}

interface Addressed {
  workspace: string;
  name: string;
  rest: string;
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

export async function startGateway(deps: GatewayDeps): Promise<Gateway> {
  const { server, resources, driver, logger } = deps;
  const targets = new Targets({ resources, driver, logger });
  let idle: IdleSweeper | undefined;
  const activator = new Activator({ driver, onStateChange: (t) => idle?.record(t) });
  idle = new IdleSweeper({
    resources,
    driver,
    activator,
    logger,
    standbyAfterMs: deps.standbyAfterS * 1000,
    // Read when a sandbox is idle, by which time the runtime is open (it says so in the log when it cannot freeze).
    canFreeze: () => driver.capabilities.freezer,
    targets: () => targets.values(),
  });
  const previews = new PreviewHosts(resources.store, deps.inferenceHost);
  await targets.start();
  await previews.start();
  idle.start();
  const tunnels = new Set<Duplex>();
  let closing = false;

  /** Which sandbox a request addresses, by Host first (any path), then by the /run path. */
  async function address(req: IncomingMessage): Promise<Addressed | undefined> {
    const url = req.url ?? '/';
    const host = deps.inferenceHost ? matchSandboxHost(req.headers.host, deps.inferenceHost) : undefined;
    if (host) {
      const rest = url.startsWith('/') ? url : `/${url}`;
      const splits = labelSplits(host.label);
      for (const s of splits) if (targets.get(s.workspace, s.name)) return { ...s, rest };
      for (const s of splits) {
        const key = { kind: 'Sandbox', workspace: s.workspace, parent: '', name: s.name };
        if (await resources.store.get(key)) return { ...s, rest };
      }
      // No such sandbox: still ask for a credential before saying so, like every other address.
      const last = splits.at(-1);
      return { workspace: last?.workspace ?? host.label, name: last?.name ?? host.label, rest };
    }
    return matchSandboxPath(url);
  }

  const previewPath = (req: IncomingMessage) =>
    req.url?.startsWith('/run/') ? matchPreviewPath(req.url) : undefined;

  const isSandboxRequest = (req: IncomingMessage) =>
    (deps.inferenceHost !== undefined &&
      matchSandboxHost(req.headers.host, deps.inferenceHost) !== undefined) ||
    (req.url?.startsWith('/run/') === true && matchSandboxPath(req.url) !== undefined) ||
    previews.match(req.headers.host, req.url ?? '/') !== undefined ||
    previewPath(req) !== undefined;

  /** Finds the sandbox and counts the request in (resuming the sandbox when frozen). */
  async function enter(workspace: string, name: string): Promise<Target> {
    let t = targets.get(workspace, name);
    if (t?.status !== 'DEPLOYED') t = await targets.resolve(workspace, name);
    const wait = activator.enter(t);
    if (wait) await wait;
    return t;
  }

  /**
   * Authenticates and enters the sandbox a request addresses; `path` is what to forward (`/port/{n}/...` for a
   * preview) and `extra` the headers a preview adds.
   */
  async function admit(req: IncomingMessage): Promise<{ t: Target; path: string; extra?: ForwardExtra }> {
    if (closing) throw new ApiError('UNAVAILABLE', 'the server is shutting down');
    // A preview's own host owns every path on it; otherwise sandbox addresses come before preview paths.
    const byHost = previews.match(req.headers.host, req.url ?? '/');
    const a = byHost ? undefined : await address(req);
    if (a) {
      await authorize(deps.authenticator, req.headers, a.workspace);
      return { t: await enter(a.workspace, a.name), path: a.rest };
    }
    const p = byHost ?? previewPath(req);
    if (!p) throw new ApiError('NOT_FOUND', `no sandbox at ${req.url}`);
    const ok = await admitPreview(
      { store: resources.store, authenticator: deps.authenticator, now: Date.now },
      req,
      p,
    );
    return {
      t: await enter(p.workspace, p.sandbox),
      path: `/port/${ok.port}${ok.rest}`,
      extra: { requestHeaders: ok.requestHeaders, responseHeaders: ok.responseHeaders },
    };
  }

  const toWire = (err: unknown) => wireErrorOf(err, { log: logger, what: 'sandbox gateway error' });

  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    try {
      const { t, path, extra } = await admit(req);
      forward(t, req, res, path, () => activator.leave(t), extra);
    } catch (err) {
      sendProblem(res, toWire(err), req.url?.split('?')[0]);
    }
  };

  // Sandbox requests are answered here, before Fastify routes or parses anything: bodies stream through
  // untouched, and the hot path costs no framework work (docs/decisions/009-sandbox-gateway-standby.md).
  const api = server.listeners('request')[0] as RequestListener | undefined;
  if (!api) throw new Error('the gateway must be started after the API created its HTTP server');
  server.removeListener('request', api);
  const onRequest: RequestListener = (req, res) => {
    if (isSandboxRequest(req)) void serve(req, res);
    else api.call(server, req, res);
  };
  server.on('request', onRequest);

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!isSandboxRequest(req)) {
      // Nobody else takes upgrades on this server: say so instead of leaving the socket hanging.
      if (server.listenerCount('upgrade') === 1)
        rejectUpgrade(socket, new ApiError('NOT_FOUND', `no route for ${req.url}`));
      return;
    }
    admit(req).then(
      ({ t, path, extra }) =>
        tunnel(t, req, socket, head, path, tunnels, () => activator.leave(t), extra?.requestHeaders),
      (err) => {
        rejectUpgrade(socket, toWire(err), req.url?.split('?')[0]);
      },
    );
  };
  server.on('upgrade', onUpgrade);

  return {
    lastUsedMs: (workspace, name) => targets.get(workspace, name)?.lastUsedMs,
    async close() {
      closing = true;
      idle.stop();
      server.removeListener('upgrade', onUpgrade);
      for (const s of tunnels) s.destroy();
      await idle.drain(targets.values());
      previews.close();
      await targets.close();
    },
  };
}
