// The controllers: the cluster-wide ones under leadership (one server leads them at a time) and each node's own
// sandbox controllers, fault watch and schedules.
import type { PeerImages } from '../runtime/images/peer-images.js';
import type pino from 'pino';
import type { Config } from '../config.js';
import { CONFIG_PROFILES, CONFIG_RECONCILERS } from '../controllers/config/index.js';
import { startControllers } from '../controllers/core/index.js';
import { sandboxReconciler } from '../controllers/sandbox/sandbox.js';
import { SandboxExpiry } from '../controllers/sandbox/sandbox-expiry.js';
import { ScheduleRunner } from '../controllers/sandbox/sandbox-schedules.js';
import { volumeReconciler } from '../controllers/volume/volume.js';
import { followVolumeDeletions } from '../controllers/volume/volume-sweep.js';
import { SandboxFaultWatch } from '../controllers/sandbox/sandbox-faults.js';
import { existingArchive } from '../runtime/volume-archives.js';
import { applicationReconciler } from '../controllers/workload/application.js';
import { deployReconciler } from '../controllers/workload/deploy.js';
import { jobRevisionReconciler } from '../controllers/job/job-revision.js';
import { startRetention } from '../controllers/job/job-retention.js';
import { agentScheduling } from '../controllers/workload/agent-schedules.js';
import { jobScheduling } from '../controllers/job/job-schedules.js';
import { TriggerSchedules } from '../controllers/code/trigger-schedules.js';
import { Scaler } from '../controllers/workload/scaler.js';
import { IdleStandby } from '../controllers/workload/idle-standby.js';
import { workloadEvent } from '../controllers/core/events.js';
import { CONTROLLERS, DrainedError, postgresLeadership, soleLeadership } from '../cluster/leadership.js';
import { formerLeaders, isDrained, takeRan } from '../cluster/nodes.js';
import { placeAgainEvery } from '../controllers/sandbox/sandbox-lost.js';
import { tellLostReplicas } from '../controllers/workload/replicas-lost.js';
import { placeReplicasEvery } from '../controllers/workload/replica-placement.js';
import { ReplicaHolding } from '../controllers/workload/replica-holding.js';
import { recordHeld } from '../cluster/fencing.js';
import { JobHolding } from '../controllers/job/job-holding.js';
import { rebuildJobApp } from '../controllers/job/job-rebuild.js';
import { placeable, shareOf } from '../cluster/replica-placements.js';
import type { StoredObject } from '../store/store.js';
import type { Late, StartOptions } from './context.js';
import type { Gateway } from './gateway.js';
import type { Http } from './http.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';
import { jobLogsDir, type Workloads } from './workloads.js';

/** The default `onFenced`: a server that lost its lead exits rather than risk acting beside the new leader. */
const fenced = (logger: pino.Logger) => (role: string, err: unknown) => {
  if (err instanceof DrainedError)
    logger.warn({ role }, 'drained: handed the lead over, exiting (started again, this server only follows)');
  else logger.fatal({ err, role }, 'lost the database session this server led with: exiting');
  logger.flush?.();
  process.exit(75);
};

export async function startAllControllers(
  config: Config,
  opts: StartOptions,
  late: Late,
  gateway: Gateway,
  parts: Core & Runtime & Http & Workloads & { peerImages?: PeerImages },
) {
  const { peerImages } = parts;
  const { logger, held, led, holding, quotas, placements, replicaPlacements } = parts;
  const { selfId, clusterSelf, tokens } = parts;
  const { images, driver, instances, snapshotLayers, snapshots } = parts;
  const { capacity } = parts;
  const { builder, builds, replicas, callbacks, jobs } = parts;
  // The controllers and sweeps act on every workspace's objects: one server of a cluster leads them at a time
  // (cluster/leadership.ts; on SQLite this one, at once). Today the leader also holds every instance they start.
  const leadership = config.databaseUrl
    ? postgresLeadership({
        url: config.databaseUrl,
        warn: (err, msg) => logger.warn({ err }, msg),
        info: (msg) => logger.info(msg),
        onLost: (name, err) => (opts.onFenced ?? fenced(logger))(name, err),
        mayLead: async (session) => !(await isDrained(session, selfId)),
        checkMs: config.leaderCheckS && config.leaderCheckS * 1000,
      })
    : soleLeadership();
  late.leadership = leadership;
  let stopActing = async () => undefined;
  const scaler = new Scaler({
    replicas,
    logger,
    removeAfterMs: config.replicaRemoveAfterS && config.replicaRemoveAfterS * 1000,
    // The last replica kept frozen at scale to zero, woken by the next request (decision 090).
    standby: new IdleStandby({
      retentionMs: config.replicaRetentionS * 1000,
      freeze: (w, r) => gateway.standbyReplica(w, r),
      onEvent: workloadEvent({ resources: led, logger }),
      logger,
    }),
  });
  // In a cluster, the part of a placed workload's scale this node runs (decision 086): none when it holds no slot
  // (a new revision's first replica is still started here by the deploy, and goes once it is DEPLOYED).
  const replicaShare =
    clusterSelf === undefined
      ? undefined
      : (o: StoredObject) =>
          placeable(o) && Array.isArray(o.body.replicaNodes) && o.body.replicaNodes.length
            ? (shareOf(o, clusterSelf) ?? { minScale: 0, maxScale: 1 })
            : undefined;
  // What the agents' and functions' deploys share beside the controllers' own deps.
  const workloadDeps = {
    builder,
    builds,
    replicas,
    driver,
    quota: quotas,
    tokens,
    replicaShare,
    node: clusterSelf,
  };
  await leadership.lead(CONTROLLERS, {
    async start(session) {
      // What the leader runs writes through `led`: fenced on its lead, refused once it lost it (decision 068).
      const resources = parts.led;
      // The image names let go of while this server did not lead go first (decision 087), before its image routes
      // take writes rather than at images ahead's next pass.
      await late.imagesAhead
        ?.tookLead()
        .catch((err) => logger.warn({ err }, 'images ahead: could not read the names let go of'));
      // Taking over from a server that died: no server sends it requests for the controllers' instances any more.
      // Its sandboxes are placed again once its lease lapses (placeAgain below), as any node's.
      // On the lead's own session: a server that lost the lead meanwhile clears no claim (decision 080).
      if (session) {
        const formerHolders = await formerLeaders(session, 'controllers', selfId);
        if (formerHolders.length) logger.warn({ formerHolders }, 'took over from a node that stopped');
        // The agents and functions whose replicas ran there are told, naming it (job tasks: the job runner).
        await tellLostReplicas(resources, selfId, await takeRan(session, formerHolders)).catch((err) =>
          logger.warn({ err }, 'could not tell the objects whose replicas ran on a node that stopped'),
        );
      }
      // The sandboxes of a node that left (lease lapsed, drained) go to a healthy one, which starts them fresh.
      const placing =
        placements &&
        placeAgainEvery({
          resources,
          placements,
          mustLeave: (n) => late.holder?.mustLeave(n) ?? false,
          place: (body, workspace) => late.holder?.place(body, workspace) ?? selfId,
          everyMs: 500,
          warn: (err, msg) => logger.warn({ err }, msg),
        });
      // Agents' and functions' replica slots: kept at their scale on live nodes of their region (decision 086).
      const placingReplicas =
        replicaPlacements &&
        placeReplicasEvery({
          resources,
          placements: replicaPlacements,
          holder: () => late.holder,
          everyMs: 500,
          warn: (err, msg) => logger.warn({ err }, msg),
        });
      // Unfinished executions go on: running attempts are re-adopted, lost ones run again (decision 025).
      await jobs.start();
      const jobSchedules = new TriggerSchedules({
        resources,
        logger,
        kinds: {
          Job: jobScheduling(resources, jobs, Date.now),
          Agent: agentScheduling((ws, name, body) => gateway.invoke(ws, name, body), logger),
        },
      });
      jobSchedules.start();
      await callbacks.start();
      const controllers = startControllers({
        resources,
        logger,
        profiles: CONFIG_PROFILES,
        // Sandboxes are each node's own (sandboxWork below).
        only: (kind) => kind !== 'Sandbox',
        reconcilers: {
          ...CONFIG_RECONCILERS,
          Volume: (d) =>
            volumeReconciler({
              ...d,
              driver,
              logger,
              archiveOf: (ws, t, v) => existingArchive(config.dataDir, ws, t, v),
              capacity,
              node: clusterSelf,
            }),
          Drive: (d) =>
            volumeReconciler({ ...d, driver, logger, archiveOf: () => undefined, capacity, drives: true }),
          Agent: (d) => deployReconciler({ ...d, ...workloadDeps }, 'Agent'),
          Function: (d) => deployReconciler({ ...d, ...workloadDeps }, 'Function'),
          Application: (d) => applicationReconciler({ ...d, replicas, images, quota: quotas, replicaShare }),
          Job: (d) =>
            jobRevisionReconciler({
              ...d,
              builder,
              builds,
              cancelExecutions: (ws, job) => jobs.cancelAll(ws, job),
            }),
        },
      });
      builds.onChange(controllers.wake);
      // Agents' and functions' scale decisions, from the load the gateway reports (decision 044); in a cluster each
      // node scales its own replicas (below).
      if (!replicaPlacements) scaler.start();
      const expiry = new SandboxExpiry({ resources, logger, lastUsedMs: gateway.lastUsedMs });
      expiry.start();
      // Ended executions past BERTH_JOB_EXECUTION_RETENTION_DAYS go, with their tasks and logs (decision 098).
      const retention = startRetention({
        store: resources.store,
        logsDir: jobLogsDir(config),
        retentionDays: config.jobExecutionRetentionDays,
        logger,
      });
      // The other servers' gateways learn that this one now holds the instances at once, not at the next beat.
      void late.nodes?.beat();
      stopActing = async () => {
        await placing?.stop();
        await placingReplicas?.stop();
        if (!replicaPlacements) scaler.stop();
        jobSchedules.stop();
        callbacks.stop();
        await jobs.stop();
        await retention.stop();
        await expiry.stop();
        await controllers.stop();
      };
    },
    stop: () => stopActing(),
    // Drained (`berth node drain`): what ran here goes, as on a dead node; the next leader starts it again, fresh.
    async handOver(session) {
      for (const i of await instances.list())
        await instances
          .remove(i.id)
          .catch((err) => logger.warn({ err, id: i.id }, 'could not remove an instance'));
      if (session) await late.nodes?.handOver('controllers', session);
    },
  });
  // What runs on this node's runtime for the sandboxes placed on it (every one on SQLite): their reconciles (start,
  // adopt, wake, release), fault watch and schedules. Every server of a cluster runs its own.
  const sandboxControllers = startControllers({
    resources: held,
    logger,
    only: (kind) => kind === 'Sandbox',
    reconcilers: {
      Sandbox: (d) =>
        sandboxReconciler({
          ...d,
          instances,
          logger,
          images,
          imageSource: peerImages,
          layers: snapshotLayers,
          collectLayers: (ws) => snapshots.collect(ws),
          self: clusterSelf,
          holding: clusterSelf === undefined ? undefined : holding,
        }),
    },
  });
  late.wakeController = sandboxControllers.wake;
  const faults = new SandboxFaultWatch({
    resources: held,
    driver,
    logger,
    sweepMs: config.faultCheckS && config.faultCheckS * 1000,
    wake: (key) => sandboxControllers.wake(key),
  });
  faults.start();
  const schedules = new ScheduleRunner({
    resources: held,
    logger,
    now: Date.now,
    startProcess: gateway.startProcess,
    holds: (ws, name) => clusterSelf === undefined || placements?.nodeOf(ws, name) === clusterSelf,
  });
  schedules.start();
  // Each node of a cluster runs the replicas placed on it, and scales them (decision 086).
  const replicaHolding =
    replicaPlacements && clusterSelf !== undefined
      ? new ReplicaHolding({
          self: clusterSelf,
          resources: held,
          builder,
          images,
          code: parts.code,
          replicas,
          placements: replicaPlacements,
          tokens,
          leads: () => leadership.leads().includes(CONTROLLERS),
          holding,
          changed: () => void late.nodes?.beat(),
          report: (key, message) => recordHeld(parts.heldWorkloads, key, message),
          logger,
        })
      : undefined;
  replicaHolding?.start();
  if (replicaHolding) scaler.start();
  // And the job tasks placed on it (decision 093), reporting their ends fenced on its lease.
  const jobHolding =
    clusterSelf !== undefined
      ? new JobHolding({
          self: clusterSelf,
          resources: held,
          builder,
          rebuild: (ws, job, app, signal) =>
            rebuildJobApp({ store: held.store, builder, code: parts.code }, ws, job, app, signal),
          instances,
          holding,
          logger,
        })
      : undefined;
  jobHolding?.start();
  // And the data of the volumes made on it whose objects were deleted (decision 102).
  const volumeSweep =
    clusterSelf !== undefined
      ? followVolumeDeletions({ store: parts.store, driver, self: clusterSelf, logger })
      : undefined;
  return {
    leadership,
    sandboxControllers,
    faults,
    schedules,
    replicaHolding,
    jobHolding,
    scaler,
    volumeSweep,
  };
}

export type Controllers = Awaited<ReturnType<typeof startAllControllers>>;
