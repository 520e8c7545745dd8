// The data plane: the gateway that serves workloads, jobs' triggers and sandboxes on the HTTP server's socket.
import type { Config } from '../config.js';
import { startGateway } from '../gateway/index.js';
import type { Holder } from '../http/peer-forward.js';
import { runsHere } from '../cluster/placement.js';
import type { Late } from './context.js';
import type { Http } from './http.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';
import type { Workloads } from './workloads.js';

export async function startDataPlane(
  config: Config,
  late: Late,
  clusterHolder: Holder | undefined,
  parts: Core & Runtime & Http & Workloads,
) {
  const { store, logger, resources, held, holding, baseUrl, clusterSelf } = parts;
  const { driver } = parts;
  const { auth, app } = parts;
  const { replicas, executions, jobs } = parts;
  const asyncTrigger = async (workspace: string, name: string, triggerId?: string) => {
    const o = await store.get({ kind: 'Agent', workspace, parent: '', name });
    const spec = o && resources.openSecrets(resources.kind('Agent'), o.body.spec ?? {});
    const t = (spec?.triggers ?? []).find((x: any) =>
      triggerId !== undefined
        ? x.id === triggerId && x.configuration?.callbackUrl
        : x.type === 'http-async' && x.enabled !== false && x.configuration?.callbackUrl,
    );
    if (!t) return undefined;
    const c = t.configuration;
    return { url: c.callbackUrl, secret: c.callbackSecret, retry: c.retry ?? 0, timeoutS: c.timeout };
  };
  const gateway = await startGateway({
    workloads: {
      executions,
      asyncTrigger,
      apiBase: baseUrl,
      replicas,
      idleTimeoutMs: config.requestIdleTimeoutS && config.requestIdleTimeoutS * 1000,
    },
    jobTriggers: { resources, runner: jobs },
    server: app.server,
    resources: held,
    driver,
    authenticator: auth.authenticator,
    logger,
    standbyAfterS: config.standbyAfterS,
    inferenceHost: config.inferenceHost,
    onSandboxDown: (key) => late.wakeController(key),
    // In a cluster, a sandbox's node, or the controllers' leader, holds what a data-plane request reaches.
    holder: clusterHolder,
    runsHere: (o) => runsHere(clusterSelf, o) && holding(),
    holding: clusterSelf === undefined ? undefined : holding,
  });
  return gateway;
}

export type Gateway = Awaited<ReturnType<typeof startDataPlane>>;
