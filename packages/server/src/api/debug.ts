// `GET /v0/<kind>/{name}/debug` for every kind with a status: what an operator looks for when something is wrong,
// gathered at once and bounded to well under a second (decision 050): status and recent events; for a sandbox, an
// agent or a function its runtime instances (running, frozen, dead or gone), their memory, tasks and disk against
// their limits, their daemon's health and last lines; the egress policy in force; and one line naming the most
// likely cause (debug-report.ts). Read through the runtime driver's inspect, stats and daemonLog and the daemon's
// /health; nothing is changed, and a frozen sandbox is not woken.
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import type { Replica, ReplicaSet } from '../controllers/workload/replicas.js';
import type { KindDescriptor } from '../kinds/types.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { sandboxId } from '../runtime/sandbox-id.js';
import { DaemonClient } from '../sandbox-api/client.js';
import type { Resources } from '../store/resources.js';
import {
  type DebugInstance,
  type DebugNetwork,
  type DebugReport,
  debuggable,
  likelyCause,
} from './debug-report.js';
import { lastLines } from '../sandbox-api/last-output.js';

/** One probe of a daemon: it answers /health from memory in a millisecond; a slower one is the finding. */
export const DEBUG_PROBE_MS = 300;
/** Events shown: enough to read the story of the last minutes, few enough for a terminal. */
export const DEBUG_EVENTS = 10;
/** Lines of a daemon's log and of an app's output shown. */
export const DEBUG_LOG_LINES = 10;
/** Replicas looked at in detail (a workload scaled out further is summed up by these). */
export const DEBUG_REPLICAS = 5;

export interface DebugDeps {
  resources: Resources;
  driver: RuntimeDriver;
  replicas: ReplicaSet;
}

const debugLines = (text: string | undefined) => lastLines(text, DEBUG_LOG_LINES, 300);

const withTimeout = <T>(p: Promise<T>, ms: number, what: string) =>
  new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });

/** Everything the runtime and the daemon say about one instance. */
async function instance(
  driver: RuntimeDriver,
  id: string,
  role: DebugInstance['role'],
  replica?: Replica,
): Promise<DebugInstance> {
  const info = await driver.inspect(id);
  const daemonLog = debugLines(await driver.daemonLog(id).catch(() => undefined));
  if (!info) return { id, role, state: 'gone', daemon: { answered: false, error: 'no instance' }, daemonLog };
  const out: DebugInstance = {
    id,
    role,
    state: info.state,
    createdAt: info.createdAt,
    address: info.address,
    daemon: { answered: false },
    daemonLog,
  };
  if (info.state === 'dead') {
    if (info.ended)
      out.memory = {
        usedBytes: 0,
        limitBytes: info.ended.memoryLimitBytes,
        peakBytes: 0,
        oomKills: info.ended.oomKills,
      };
    out.daemon.error = 'the sandbox ended';
    return out;
  }
  const s = await driver.stats(id).catch(() => undefined);
  if (s) {
    out.memory = {
      usedBytes: s.memoryBytes,
      limitBytes: s.memoryLimitBytes,
      peakBytes: s.memoryPeakBytes,
      oomKills: s.oomKills,
    };
    out.pids = { current: s.pids, max: s.pidsMax };
    if (s.disk) out.disk = s.disk;
  }
  if (info.state === 'frozen') {
    out.daemon.error = 'not asked: the sandbox is in standby (asking would wake it)';
    return out;
  }
  try {
    const h = await DaemonClient.at(info.socketPath).health(DEBUG_PROBE_MS);
    out.daemon = {
      answered: true,
      version: h.version,
      uptimeSeconds: h.uptimeSeconds,
      runningProcesses: h.runningProcesses,
      keepAliveProcesses: h.activeKeepAlive,
    };
  } catch (err) {
    out.daemon.error = (err as Error).message;
  }
  if (replica && out.daemon.answered) {
    const p = await withTimeout(
      DaemonClient.at(info.socketPath).process('app'),
      DEBUG_PROBE_MS,
      'the daemon',
    ).catch(() => undefined);
    if (p) out.app = { status: p.status, exitCode: p.exitCode, lastOutput: debugLines(p.logs) };
  }
  return out;
}

/** The sandbox's egress policy without its routing secrets, and the proxy as its events last told it. */
function networkOf(spec: any, events: { message: string; time?: string }[]): DebugNetwork | undefined {
  const n = spec?.network;
  if (!n) return undefined;
  const told = [...events].reverse().find((e) => /^egress proxy (down|back)/.test(e.message));
  const down = told?.message.startsWith('egress proxy down');
  return {
    ...(n.allowedDomains ? { allowedDomains: n.allowedDomains } : {}),
    ...(n.forbiddenDomains ? { forbiddenDomains: n.forbiddenDomains } : {}),
    egress: n.egress?.mode === 'gateway' ? `gateway ${n.egress.gateway}` : 'direct',
    proxy: down ? `down since ${told?.time ?? 'its last event'}` : 'running',
  };
}

/** The route's path for a kind, Fastify style: /sandboxes/:sandboxName/debug. */
const routeOf = (kd: KindDescriptor) => `${kd.path.replace(/\{(\w+)\}/g, ':$1')}/:${kd.nameParam}/debug`;

export function register(app: FastifyInstance, deps: DebugDeps, kinds: KindDescriptor[]) {
  const { resources, driver, replicas } = deps;
  for (const kd of debuggable(kinds)) {
    app.get(routeOf(kd), async (req) => {
      const started = performance.now();
      const a = requireRole(req, 'viewer');
      const params = req.params as Record<string, string>;
      const parents = (kd.parents ?? []).map((p) => params[p.param]);
      const name = params[kd.nameParam];
      const o = await resources.mustGet(kd, a.workspace, parents, name);
      const body = o.body;
      const events = (body.events ?? []).slice(-DEBUG_EVENTS);
      let instances: DebugInstance[] = [];
      if (kd.kind === 'Sandbox')
        instances = [await instance(driver, sandboxId(a.workspace, name), 'sandbox')];
      else if (kd.kind === 'Agent' || kd.kind === 'Function') {
        const w = replicas.get(a.workspace, kd.kind, name);
        const all = [...(w?.replicas ?? []), ...(w?.canary?.w.replicas ?? [])].filter((r) => !r.gone);
        instances = await Promise.all(
          all.slice(0, DEBUG_REPLICAS).map((r) => instance(driver, r.id, 'replica', r)),
        );
      }
      const network = kd.kind === 'Sandbox' ? networkOf(body.spec, body.events ?? []) : undefined;
      const gathered = {
        kind: kd.kind,
        name,
        workspace: a.workspace,
        ...(body.status ? { status: body.status } : {}),
        ...(body.state ? { state: body.state } : {}),
        events,
        instances,
        ...(network ? { network } : {}),
      };
      const report: DebugReport = {
        ...gathered,
        cause: likelyCause(gathered),
        tookMs: Math.round((performance.now() - started) * 10) / 10,
      };
      return report;
    });
  }
}
