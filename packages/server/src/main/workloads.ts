// What agents, functions and jobs run on: the code store, the builder and its build steps, replicas, uploads,
// callbacks, executions and the job runner.
import { join } from 'node:path';
import type { Config } from '../config.js';
import { CodeUploads } from '../api/code-upload.js';
import { Builder } from '../builds/builder.js';
import { CodeStore } from '../builds/code-store.js';
import { ReplicaSet } from '../controllers/workload/replicas.js';
import { BuildSteps } from '../controllers/code/build-step.js';
import { JobRunner } from '../controllers/job/job-runner.js';
import { rebuildJobApp } from '../controllers/job/job-rebuild.js';
import { Callbacks } from '../controllers/code/callbacks.js';
import { JobCallbacks } from '../controllers/job/job-callbacks.js';
import { Executions } from '../controllers/workload/executions.js';
import { workloadEvent } from '../controllers/core/events.js';
import type { Late } from './context.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';

export function startWorkloads(config: Config, parts: Core & Runtime, late: Late) {
  const { logger, outbound, resources, led, quotas, baseUrl, masterKey } = parts;
  const { images, instances } = parts;
  const code = new CodeStore(config.dataDir);
  const builder = new Builder({
    dataDir: config.dataDir,
    instances,
    code,
    logger,
    gitAllowLocal: config.gitAllowLocal,
    outbound,
    images,
  });
  // Builds run as their own step, outside the reconcile slots, and wake the objects they are for (decision 044).
  const builds = new BuildSteps({ builder, quota: quotas, logger });
  const replicas = new ReplicaSet({
    instances,
    logger,
    quota: quotas,
    // A follower's replicas (decision 086) are reported as their holder's (decision 092).
    onEvent: workloadEvent({
      resources: led,
      logger,
      held: parts.clusterSelf ? parts.heldWorkloads : undefined,
    }),
  });
  const uploads = new CodeUploads({ resources, code, baseUrl, masterKey });
  // Replicas, callbacks and job runs are the leader's: what they write is fenced on its lead (decision 068).
  const callbacks = new Callbacks({ resources: led, logger, outbound });
  const executions = new Executions({ logger, callbacks });
  const jobCallbacks = new JobCallbacks({ resources: led, callbacks, logger });
  const self = parts.clusterSelf;
  const jobs = new JobRunner({
    onFinished: (ws, rec, stats) => jobCallbacks.notify(ws, rec, stats),
    resources: led,
    builder,
    // An execution's app missing here (a new leader, an older revision) is built again, or its tasks end (decision 077).
    rebuild: (ws, job, app, signal) =>
      rebuildJobApp({ store: resources.store, builder, code }, ws, job, app, signal),
    instances,
    logger,
    logsDir: jobLogsDir(config),
    maxTasks: config.jobMaxTasks,
    quota: quotas,
    node: parts.clusterSelf,
    // In a cluster, each attempt is placed on a node, which runs it (decision 093).
    nodes:
      self === undefined
        ? undefined
        : {
            // Before this server joined, it runs them itself.
            place: (region, tasks, room) =>
              late.holder ? late.holder.placeTask(region, tasks, room) : room(self) ? self : undefined,
            lapsed: (node) => late.holder?.lapsed(node) ?? false,
            usable: (node) => !(late.holder?.mustLeave(node) ?? false),
            volumeNodes: (ws, names) => parts.volumeNodes?.nodesOf(ws, names) ?? [],
            count: () => late.holder?.taskNodes() ?? 1,
          },
  });
  return { code, builder, builds, replicas, uploads, callbacks, executions, jobCallbacks, jobs };
}

export type Workloads = ReturnType<typeof startWorkloads>;

/** Where the job runner keeps its task logs (`<workspace>/<job>/<execution>/<index>.log`). */
export const jobLogsDir = (config: Pick<Config, 'dataDir'>) => join(config.dataDir, 'jobs', 'logs');
