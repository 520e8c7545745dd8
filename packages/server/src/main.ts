// Composition root: config -> data dir -> store -> auth -> resources -> controllers -> HTTP -> shutdown.
import { join } from 'node:path';
import pino from 'pino';
import { cpus, hostname, totalmem } from 'node:os';
import { createApp } from './api/app.js';
import { registerCrud } from './api/crud.js';
import { replicaCount } from './api/workload-replicas.js';
import { registerIdentityPublicRoutes, registerIdentityRoutes } from './api/identity.js';
import { registerMetrics } from './api/metrics.js';
import { metricsAccess } from './api/metrics-access.js';
import { sandboxSampler } from './api/sandbox-metrics.js';
import { registerOpenApi } from './api/openapi.js';
import * as debug from './api/debug.js';
import * as egressUsage from './api/egress-usage.js';
import * as previewTokens from './api/preview-tokens.js';
import * as templateVersions from './api/volume-template-versions.js';
import * as sandboxSchedules from './api/sandbox-schedules.js';
import * as scheduleLists from './api/schedule-lists.js';
import { registerCatalogs } from './api/catalogs.js';
import { createAuth } from './auth/index.js';
import { K, keys as authKeys } from './auth/records.js';
import { loadMasterKey } from './crypto/master-key.js';
import { SecretBox } from './crypto/secret-box.js';
import { type Config, regionNames } from './config.js';
import { CONFIG_PROFILES, CONFIG_RECONCILERS } from './controllers/config/index.js';
import { startControllers } from './controllers/core/index.js';
import {
  keepPlaced,
  sandboxOwner,
  sandboxReconciler,
  terminatedRetentionMs,
} from './controllers/sandbox/sandbox.js';
import { deleteWhenDone } from './api/wait.js';
import { SandboxExpiry } from './controllers/sandbox/sandbox-expiry.js';
import { ScheduleRunner } from './controllers/sandbox/sandbox-schedules.js';
import { removeOrphanArchives, volumeReconciler } from './controllers/volume/volume.js';
import { SandboxFaultWatch, sayEgressProxy } from './controllers/sandbox/sandbox-faults.js';
import { sayDeepStandby } from './controllers/sandbox/deep-standby-event.js';
import { existingArchive } from './runtime/volume-archives.js';
import { Instances } from './runtime/instances.js';
import { LazyRuntime } from './runtime/lazy-runtime.js';
import { createLinuxDriver, imageRootsInUse, ImageStore, SANDBOX_NET } from './runtime/index.js';
import { type Lookup, Outbound } from './outbound/index.js';
import { readRegistryAuth } from './runtime/images/auth-file.js';
import { referencedImages, register as registerImages } from './api/images.js';
import { register as registerImageBuilds } from './api/image-builds.js';
import { register as registerImageShares } from './api/image-shares.js';
import { register as registerSnapshots } from './api/snapshots.js';
import { Snapshots } from './controllers/sandbox/snapshots.js';
import { SnapshotLayers } from './runtime/snapshot-layers.js';
import { LayerCache } from './builds/dockerfile/layer-cache.js';
import { hostLabelsOf, LABELED_KINDS, runUrlOf } from './gateway/address.js';
import { startGateway } from './gateway/index.js';
import { sandboxCreateHook, sandboxReplaceHook } from './api/sandboxes.js';
import { volumeCreateHook } from './api/volumes.js';
import { KINDS } from './kinds/index.js';
import { LOG_REDACT_PATHS } from './log-redact.js';
import { secureDataDir } from './store/data-dir.js';
import { backfillLabels } from './store/host-labels.js';
import { Resources } from './store/resources.js';
import { agreeOnMasterKey } from './store/master-key-check.js';
import { openStore } from './store/open.js';
import type { ResourceKey, Store } from './store/store.js';
import { registerTemplates } from './templates/routes.js';
import { modelGateway } from './models/http-route.js';
import { CodeUploads, UPLOAD_URL_HEADER } from './api/code-upload.js';
import { registerRevisionRoutes } from './api/revisions.js';
import { registerCustomDomains } from './api/custom-domains.js';
import { txtLookup } from './outbound/dns-txt.js';
import { registerDriveTokenRoutes } from './api/drive-tokens.js';
import { registerWorkloadLogRoutes } from './api/workload-logs.js';
import { Builder } from './builds/builder.js';
import { CodeCopies, peerToken } from './builds/code-copies.js';
import { CodeStore } from './builds/code-store.js';
import { upgradeLegacyBuilds } from './builds/legacy.js';
import { ReplicaSet } from './controllers/workload/replicas.js';
import { applicationReconciler } from './controllers/workload/application.js';
import { deployReconciler } from './controllers/workload/deploy.js';
import { jobRevisionReconciler } from './controllers/job/job-revision.js';
import { BuildSteps } from './controllers/code/build-step.js';
import { JobRunner } from './controllers/job/job-runner.js';
import { jobOwner } from './controllers/job/job-owner.js';
import { workloadOwner } from './controllers/workload/workload-owner.js';
import { Callbacks } from './controllers/code/callbacks.js';
import { JobCallbacks } from './controllers/job/job-callbacks.js';
import { agentScheduling } from './controllers/workload/agent-schedules.js';
import { jobScheduling } from './controllers/job/job-schedules.js';
import { TriggerSchedules } from './controllers/code/trigger-schedules.js';
import { ConnectionTokens } from './oauth/connection-tokens.js';
import { registerJobExecutionRoutes } from './api/job-executions.js';
import { Scaler } from './controllers/workload/scaler.js';
import { Executions } from './controllers/workload/executions.js';
import { QuotaLedger } from './controllers/core/quota-ledger.js';
import { workloadEvent } from './controllers/core/events.js';
import { quotaAdmission } from './controllers/core/quota-admission.js';
import { registerQuotas } from './api/quotas.js';
import { registerWatch } from './api/watch.js';
import { WatchLimit } from './api/watch-stream.js';
import { registerCaller } from './api/caller.js';
import { registerWorkloadReplicaRoutes } from './api/workload-replicas.js';
import { registerConsole } from './api/console.js';
import { EVERY_WORKSPACE } from './store/store.js';
import { registerNodes } from './api/nodes.js';
import { DrainedError, postgresLeadership, soleLeadership } from './cluster/leadership.js';
import { formerLeaders, isDrained, localNodes, nodeId, type Nodes, postgresNodes } from './cluster/nodes.js';
import { placeAgainEvery } from './controllers/sandbox/sandbox-lost.js';
import { forwardHeldRoutes, type Holder } from './http/peer-forward.js';
import { heldObjectRequest, heldSandboxOf } from './api/held-crud.js';
import { type InstanceHolder, instanceHolder } from './cluster/instance-holder.js';
import { fencedStore } from './cluster/fencing.js';
import { runsHere, SandboxPlacements } from './cluster/placement.js';

const MB = 1024 ** 2;

export interface RunningServer {
  url: string;
  port: number;
  /** Printed once on first start; undefined afterwards. */
  adminKey?: string;
  /** The server's store, for embedding and tests (the database is held exclusively by this process). */
  store: Store;
  /** Every route the HTTP server registered (method and Fastify URL), for tests that walk the whole surface. */
  routes: readonly { method: string; url: string }[];
  close(): Promise<void>;
}

export interface StartOptions {
  logStream?: NodeJS.WritableStream;
  /** How the server's outbound requests resolve names (tests play a rebinding name); default: the host's. */
  outboundLookup?: Lookup;
  /**
   * This server led a role and lost its database session: it has stopped acting and must not act again (another
   * server may lead already). Default: log and exit, for the supervisor to start it again as a follower.
   */
  onFenced?: (role: string, err: unknown) => void;
}

/** A listen address others can reach: a wildcard one stands for the machine's name. */
const peerHost = (host: string) =>
  host === '0.0.0.0' || host === '::' ? hostname() : host.includes(':') ? `[${host}]` : host;

/** The default `onFenced`: a server that lost its lead exits rather than risk acting beside the new leader. */
const fenced = (logger: pino.Logger) => (role: string, err: unknown) => {
  if (err instanceof DrainedError)
    logger.warn({ role }, 'drained: handed the lead over, exiting (started again, this server only follows)');
  else logger.fatal({ err, role }, 'lost the database session this server led with: exiting');
  logger.flush?.();
  process.exit(75);
};

export async function startServer(config: Config, opts: StartOptions = {}): Promise<RunningServer> {
  const loosened = secureDataDir(config.dataDir);
  const logger = pino(
    { level: config.logLevel, redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } },
    (opts.logStream as pino.DestinationStream | undefined) ?? pino.destination(2),
  );
  if (loosened.length)
    logger.warn({ paths: loosened }, 'data dir was readable by other users: made 0700, its files 0600');
  const masterKey = loadMasterKey(config);
  const box = new SecretBox(masterKey);
  // Every request sent outward for a user goes through this one client and its address rules (outbound/).
  const outbound = new Outbound({
    allowCidrs: config.outboundAllowCidrs,
    hostRanges: [SANDBOX_NET],
    lookup: opts.outboundLookup,
  });
  const store = await openStore(config, logger);
  if (config.databaseUrl)
    await agreeOnMasterKey(store, masterKey).catch(async (e) => {
      await store.close();
      throw e;
    });
  // In a cluster, each sandbox runs on the node it is placed on (docs/decisions/059-cluster-placement.md): every
  // server keeps the index of placements; `clusterSelf` is this node's id there (undefined on SQLite: one node).
  const selfId = nodeId(config.dataDir, config.nodeId);
  const clusterSelf = config.databaseUrl ? selfId : undefined;
  const placements = config.databaseUrl ? new SandboxPlacements(store) : undefined;
  await placements?.start();
  let holder: InstanceHolder | undefined;
  let nodes: Nodes | undefined;
  // Each workspace's quotas (decision 040): what its sandboxes ask for, what runs for it; judged at every write.
  const quotas = new QuotaLedger(store, config.quotas);
  await quotas.start();
  const baseUrl = () => config.publicUrl ?? `http://${config.host}:${actualPort}`;
  let actualPort = config.port;
  const urlOf = runUrlOf({
    baseUrl,
    inferenceHost: config.inferenceHost,
    defaultRegion: config.regions[0],
  });
  const resources = new Resources(store, KINDS, box, {
    regions: regionNames(config),
    urlOf,
    labelsOf: hostLabelsOf,
    egressGateways: config.egressGateways,
    outbound,
    admit: quotaAdmission(quotas),
    placeOf: (kd, body) => (kd.kind === 'Sandbox' && holder ? { node: holder.place(body) } : undefined),
  });
  // What a node writes as the holder of a sandbox is fenced on its placement and the node's lease (decision 064); a
  // node without a lease starts, wakes and writes nothing for its sandboxes.
  const held = clusterSelf
    ? resources.withStore(
        fencedStore(
          store,
          { fence: () => nodes?.fence(), refused: () => nodes?.refused() },
          (k) => k.kind === 'Sandbox',
        ),
      )
    : resources;
  const holding = () => clusterSelf === undefined || nodes?.fence() !== undefined;
  // OAuth2 connections' access tokens (decision 049): refreshed through `outbound`, kept fresh for running workloads.
  const tokens = new ConnectionTokens({ resources, outbound, dataDir: config.dataDir, logger });
  tokens.start();
  // Objects stored before the address table existed get their labels (a no-op on every later start).
  await backfillLabels(store, LABELED_KINDS, hostLabelsOf, (o, msg) => logger.warn(o, msg));
  const images = new ImageStore({
    dataDir: config.dataDir,
    insecure: config.insecureRegistries,
    mirrors: config.registryMirrors,
    credentials: readRegistryAuth(config.registryAuthFile),
    maxLayerBytes: config.imageMaxLayerBytes,
    quotaBytes: config.imageQuotaMb && config.imageQuotaMb * 1024 ** 2,
    rootsInUse: (workspace) => imageRootsInUse(config.dataDir, workspace),
    outbound,
  });
  // A deleted workspace's image names go with it: at once, and at start for one deleted by a server that died
  // before it could drop them (a new workspace of the same name never holds the old one's images).
  store.watch((c) => {
    if (c.type === 'DELETED' && c.object.kind === K.workspace) images.forgetWorkspace(c.object.name);
  });
  images.keepWorkspaces(
    new Set((await store.list({ workspace: EVERY_WORKSPACE, kind: K.workspace })).map((w) => w.name)),
  );
  const driver = new LazyRuntime(config.dataDir, logger, (dataDir) =>
    createLinuxDriver({
      dataDir,
      images,
      warmPoolSize: config.warmPoolSize,
      warmPoolMax: config.warmPoolMax,
      deepStandbyAfterS: config.deepStandbyAfterS,
      deepStandbyKeepDaemon: config.deepStandbyDaemon === 'resident',
      swap: { file: join(dataDir, 'swap', 'berth.swap'), sizeMb: config.swapMb },
      onDeepStandby: (e) => void sayDeepStandby({ resources: held, driver, logger }, e),
      allowCidrs: config.sandboxAllowCidrs,
      egressResolvers: config.egressResolvers,
      egressGateways: config.egressGateways,
      // One line per proxied connection and per DNS answer: sandbox address, name, decision (never headers).
      onEgressEvent: (e) => {
        if (e.type === 'audit') logger.info({ egress: e.line }, 'egress');
        else if (e.type === 'request') {
          logger.info({ egress: e.request }, 'egress request');
          // The provider refused a connection's access token the proxy put in: refreshed once (decision 049).
          if (e.request.status === 401 && e.request.token) tokens.unauthorized(e.request.token);
        } else if (e.type === 'proxy') {
          logger.warn({ proxy: e.state, sandboxes: e.sources.length }, `egress proxy ${e.state}`);
          void sayEgressProxy({ resources: held, driver }, e).catch((err) =>
            logger.warn({ err }, 'could not record the egress proxy event'),
          );
        } else logger.debug({ dns: e.decision }, 'egress dns');
      },
    }),
  );
  // Every runtime instance starts, goes and is collected here, owned by an object (decision 044).
  const instances = new Instances({ driver, logger });
  // Snapshot layers (decision 053): what captures a killed server left half-written goes before anything reads them.
  const snapshotLayers = new SnapshotLayers(config.dataDir, config.snapshotMaxLayers);
  snapshotLayers.sweep();
  const snapshots = new Snapshots({
    resources,
    instances,
    layers: snapshotLayers,
    quotaBytes: config.snapshotQuotaMb && config.snapshotQuotaMb * 1024 ** 2,
  });
  const capacity = { totalMb: config.volumeCapacityMb, workspaceMb: config.workspaceVolumeCapacityMb };
  const auth = await createAuth({
    store,
    dataDir: config.dataDir,
    logger,
    shared: config.databaseUrl ? box : undefined,
  });
  auth.setIssuer(baseUrl);
  const app = createApp({ bodyLimit: config.bodyLimit, logger, authenticator: auth.authenticator });
  const routes: { method: string; url: string }[] = [];
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) routes.push({ method, url: r.url });
  });
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
    onEvent: workloadEvent({ resources, logger }),
  });
  const uploads = new CodeUploads({ resources, code, baseUrl });
  const callbacks = new Callbacks({ resources, logger, outbound });
  const executions = new Executions({ logger, callbacks });
  const jobCallbacks = new JobCallbacks({ resources, callbacks, logger });
  const jobs = new JobRunner({
    onFinished: (ws, rec, stats) => jobCallbacks.notify(ws, rec, stats),
    resources,
    builder,
    instances,
    logger,
    logsDir: join(config.dataDir, 'jobs', 'logs'),
    maxTasks: config.jobMaxTasks,
    quota: quotas,
  });
  // `?upload=true` on a write of an agent or function answers where to PUT the zip (the service's CLI flow).
  const uploadUrl = (req: any, reply: any, o: any) => {
    if ((req.query as Record<string, string>)?.upload === 'true')
      reply.header(UPLOAD_URL_HEADER, uploads.urlFor(o));
  };
  // In a cluster every server keeps a copy of each source, so whichever server leads next can build it again.
  const codeCopies = config.databaseUrl
    ? new CodeCopies({
        store,
        code,
        token: peerToken(masterKey),
        logger,
        peers: async () =>
          ((await nodes?.list()) ?? []).filter((n) => n.healthy && n.id !== selfId).map((n) => n.address),
      })
    : undefined;
  codeCopies?.register(app);
  await codeCopies?.start();
  // In a cluster, the server leading the controllers holds the instances they start (and the files they leave:
  // uploaded code, build and job logs, images, replicas), and each sandbox's node holds it: the other servers send
  // requests about those there (http/peer-forward.ts).
  const clusterHolder: Holder | undefined = config.databaseUrl
    ? {
        decide: () => holder?.decide() ?? { here: true },
        decideSandbox: (ws, name) => holder?.decideNode(placements?.nodeOf(ws, name)) ?? { here: true },
        self: selfId,
      }
    : undefined;
  const sentToHolder = forwardHeldRoutes(clusterHolder, undefined, heldSandboxOf);
  await app.register(async (held) => {
    held.addHook('onRequest', sentToHolder);
    uploads.register(held);
  });
  // What a deleted workspace left on this machine: removed before its deletion is answered, and by every other server
  // of a cluster (the holder of its builds among them) when the deletion reaches it through the change feed.
  const removeWorkspaceFiles = async (ws: string) => {
    snapshotLayers.removeWorkspace(ws);
    await builder.removeWorkspace(ws);
  };
  store.watch((c) => {
    if (c.type === 'DELETED' && c.object.kind === K.workspace)
      removeWorkspaceFiles(c.object.name).catch((err) =>
        logger.warn({ err, workspace: c.object.name }, "could not remove a deleted workspace's files"),
      );
  });
  // Open watches per workspace, whichever route streams them (api/watch-stream.ts).
  const watches = new WatchLimit();
  await app.register(
    async (v0) => {
      v0.addHook('onRequest', forwardHeldRoutes(clusterHolder, heldObjectRequest));
      registerCrud(v0, KINDS, {
        resources,
        watch: { authenticator: auth.authenticator, limit: watches },
        createHooks: {
          Sandbox: sandboxCreateHook({ resources, images }),
          Volume: volumeCreateHook({ resources, capacity }),
          Drive: volumeCreateHook({ resources, capacity }, 'Drive'),
        },
        replaceHooks: { Sandbox: sandboxReplaceHook({ resources, images }) },
        deleteHooks: {
          Sandbox: deleteWhenDone(resources, (o) => terminatedRetentionMs(o.body) > 0),
          Volume: deleteWhenDone(resources),
          Drive: deleteWhenDone(resources),
        },
        afterWrite: { Agent: uploadUrl, Function: uploadUrl, Job: uploadUrl },
        decorate: {
          Agent: replicaCount(replicas),
          Function: replicaCount(replicas),
          Application: replicaCount(replicas),
        },
      });
      registerDriveTokenRoutes(v0, { resources });
      for (const m of [previewTokens, sandboxSchedules, scheduleLists, egressUsage])
        m.register(v0, { resources });
      await v0.register(async (held) => {
        held.addHook('onRequest', sentToHolder);
        registerRevisionRoutes(held, { resources, builder, executions });
        registerWorkloadLogRoutes(held, { resources, replicas, driver });
        debug.register(held, { resources, replicas, driver }, KINDS);
        registerJobExecutionRoutes(held, { resources, runner: jobs });
        templateVersions.register(held, { resources, dataDir: config.dataDir });
        registerImages(held, {
          images,
          resources,
          referenced: (ws) => referencedImages(store, ws),
          clearBuildCache: (ws) => new LayerCache(config.dataDir, ws).clear(),
        });
        registerImageShares(held, {
          images,
          workspaceExists: async (ws) => (await store.get(authKeys.workspace(ws))) !== undefined,
        });
        registerImageBuilds(held, { dataDir: config.dataDir, instances, images });
        registerQuotas(held, {
          store,
          ledger: quotas,
          authenticator: auth.authenticator,
          volumes: capacity,
          images: (ws) => {
            const u = images.usage(ws);
            return {
              usedMb: Math.ceil(u.usedBytes / MB),
              limitMb: u.limitBytes && Math.floor(u.limitBytes / MB),
            };
          },
        });
        registerWorkloadReplicaRoutes(held, { resources, replicas });
        registerSnapshots(held, { resources, snapshots, images });
      });
      registerCustomDomains(v0, {
        store,
        lookupTxt: txtLookup(config.domainResolvers),
        workspaceExists: async (ws) => (await store.get(authKeys.workspace(ws))) !== undefined,
        inferenceHost: config.inferenceHost,
      });
      registerIdentityRoutes(v0, auth.context, { deleted: removeWorkspaceFiles });
      registerTemplates(v0);
      registerCatalogs(v0, {
        regions: config.regions,
        egressGateways: config.egressGateways,
        inferenceHost: config.inferenceHost,
      });
      registerWatch(v0, { resources, kinds: KINDS, authenticator: auth.authenticator, limit: watches });
      registerCaller(v0);
      registerNodes(v0, { nodes: () => nodes });
      registerOpenApi(v0, KINDS);
    },
    { prefix: '/v0' },
  );
  registerIdentityPublicRoutes(app, auth.context);
  registerConsole(app);
  const metrics = registerMetrics(app, undefined, {
    sandboxes: sandboxSampler({ store, driver }),
    access: metricsAccess({ token: config.metricsToken, authenticator: auth.authenticator, store }),
  });
  await app.register(modelGateway, {
    resources,
    authenticator: auth.authenticator,
    outbound,
    registry: metrics,
    upstreamTimeoutMs: config.modelTimeoutMs,
    outputEstimate: config.modelOutputEstimate,
  });
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
  // The controllers start after the gateway; until then nothing is reported (no request arrives before listen).
  let wakeController: (key: ResourceKey) => void = () => undefined;
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
    onSandboxDown: (key) => wakeController(key),
    // In a cluster, a sandbox's node, or the controllers' leader, holds what a data-plane request reaches.
    holder: clusterHolder,
    runsHere: (o) => runsHere(clusterSelf, o) && holding(),
    holding: clusterSelf === undefined ? undefined : holding,
  });
  // The instances an earlier server left: each owner kind says which it still wants (sandboxes of objects that
  // exist; replicas of revisions workloads still run, kept for their deploy to take over, decision 029; tasks whose
  // attempts the job runner re-adopts); every other one, builds among them, is removed before anything starts.
  instances.register(sandboxOwner(store, clusterSelf));
  instances.register(workloadOwner({ store, builder, replicas }));
  instances.register(jobOwner(store));
  await instances.collect();
  await removeOrphanArchives({ resources, logger, now: () => new Date(), dataDir: config.dataDir });
  // Builds of a server before decision 036 are not used again (their deploys build anew); a deleted workspace's
  // builds a stopped server could not remove go now.
  const earlierTasksRunning = (await instances.list()).some((i) => i.role === 'task' && i.state !== 'dead');
  await upgradeLegacyBuilds({ dataDir: config.dataDir, store, code, earlierTasksRunning });
  const workspaces = await store.list({ workspace: EVERY_WORKSPACE, kind: K.workspace });
  await builder.removeWorkspacesExcept(new Set(workspaces.map((w) => w.name)));
  // Images only removed sandboxes ran on, and no workspace holds by name (docs/decisions/018-images.md).
  images.collect();
  // The controllers and sweeps act on every workspace's objects: one server of a cluster leads them at a time
  // (cluster/leadership.ts; on SQLite this one, at once). Today the leader also holds every instance they start.
  const leadership = config.databaseUrl
    ? postgresLeadership({
        url: config.databaseUrl,
        warn: (err, msg) => logger.warn({ err }, msg),
        info: (msg) => logger.info(msg),
        onLost: (name, err) => (opts.onFenced ?? fenced(logger))(name, err),
        mayLead: async (session) => !(await isDrained(session, selfId)),
      })
    : soleLeadership();
  let stopActing = async () => undefined;
  await leadership.lead('controllers', {
    async start() {
      // Taking over from a server that died: no server sends it requests for the controllers' instances any more.
      // Its sandboxes are placed again once its lease lapses (placeAgain below), as any node's.
      if (config.databaseUrl) {
        const formerHolders = await formerLeaders(config.databaseUrl, 'controllers', selfId);
        if (formerHolders.length) logger.warn({ formerHolders }, 'took over from a node that stopped');
      }
      // The sandboxes of a node that left (lease lapsed, drained) go to a healthy one, which starts them fresh.
      const placing =
        placements &&
        placeAgainEvery({
          resources,
          placements,
          mustLeave: (n) => holder?.mustLeave(n) ?? false,
          place: (body) => holder?.place(body) ?? selfId,
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
            }),
          Drive: (d) =>
            volumeReconciler({ ...d, driver, logger, archiveOf: () => undefined, capacity, drives: true }),
          Agent: (d) =>
            deployReconciler({ ...d, builder, builds, replicas, driver, quota: quotas, tokens }, 'Agent'),
          Function: (d) =>
            deployReconciler({ ...d, builder, builds, replicas, driver, quota: quotas, tokens }, 'Function'),
          Application: (d) => applicationReconciler({ ...d, replicas, images, quota: quotas }),
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
      // Agents' and functions' scale decisions, from the load the gateway reports (decision 044).
      const scaler = new Scaler({
        replicas,
        logger,
        removeAfterMs: config.replicaRemoveAfterS && config.replicaRemoveAfterS * 1000,
      });
      scaler.start();
      const expiry = new SandboxExpiry({ resources, logger, lastUsedMs: gateway.lastUsedMs });
      expiry.start();
      // The other servers' gateways learn that this one now holds the instances at once, not at the next beat.
      void nodes?.beat();
      stopActing = async () => {
        await placing?.stop();
        scaler.stop();
        jobSchedules.stop();
        callbacks.stop();
        await jobs.stop();
        await expiry.stop();
        await controllers.stop();
      };
    },
    stop: () => stopActing(),
    // Drained (`berth node drain`): what ran here goes, as on a dead node; the next leader starts it again, fresh.
    async handOver() {
      for (const i of await instances.list())
        await instances
          .remove(i.id)
          .catch((err) => logger.warn({ err, id: i.id }, 'could not remove an instance'));
      await nodes?.handOver('controllers');
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
          layers: snapshotLayers,
          collectLayers: (ws) => snapshots.collect(ws),
          self: clusterSelf,
          holding: clusterSelf === undefined ? undefined : holding,
        }),
    },
  });
  wakeController = sandboxControllers.wake;
  const faults = new SandboxFaultWatch({
    resources: held,
    driver,
    logger,
    sweepMs: config.faultCheckS && config.faultCheckS * 1000,
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
  await app.listen({ host: config.host, port: config.port });
  const addr = app.server.address();
  actualPort = typeof addr === 'object' && addr ? addr.port : config.port;
  const bootstrap = await auth.bootstrap();
  let placedHere: ResourceKey[] = [];
  const nodeOpts = {
    self: {
      id: selfId,
      // Not the public URL: in a cluster that is the address in front of every server, and a request sent on must
      // reach this one.
      address: config.peerUrl ?? `http://${peerHost(config.host)}:${actualPort}`,
      region: config.regions[0],
      cores: cpus().length,
      memoryMb: Math.floor(totalmem() / MB),
    },
    instances: async () => (await instances.list()).filter((i) => i.state !== 'dead').length,
    leads: () => leadership.leads(),
    leaseMs: (config.nodeLeaseS ?? 10) * 1000,
    warn: (err: unknown, msg: string) => logger.warn({ err }, msg),
    info: (msg: string) => logger.info(msg),
    // Before it acts under a (new) lease: what the database places here is kept, the rest removed, then taken up.
    settle: async () => {
      const kept = await keepPlaced(store, instances, selfId);
      placedHere = kept.placed;
      if (kept.removed.length)
        logger.warn({ instances: kept.removed }, 'removed the instances of sandboxes placed on other nodes');
    },
    held: () => {
      // And what the feed placed here while it re-read (its reconcile found the node not holding yet).
      for (const [workspace, name, node] of placements?.placed() ?? [])
        if (node === selfId) placedHere.push({ kind: 'Sandbox', workspace, parent: '', name });
      for (const k of placedHere) sandboxControllers.wake(k);
      placedHere = [];
    },
    lost: () => gateway.forgetSandboxes(),
  };

  nodes = config.databaseUrl ? await postgresNodes(config.databaseUrl, nodeOpts) : localNodes(nodeOpts);
  if (config.databaseUrl)
    holder = await instanceHolder({
      nodes,
      leadership,
      placements: placements as SandboxPlacements,
      role: 'controllers',
      warn: (err, msg) => logger.warn({ err }, msg),
    });
  return {
    url: `http://${config.host}:${actualPort}`,
    port: actualPort,
    adminKey: bootstrap.adminKey,
    store,
    routes,
    async close() {
      // Sandboxes keep running: a restarted server adopts them as they are.
      holder?.close();
      codeCopies?.close();
      await schedules.stop();
      await faults.stop();
      await sandboxControllers.stop();
      await leadership.close();
      await nodes?.close();
      await gateway.close();
      await builds.stop();
      await app.close();
      await driver.close();
      tokens.close();
      await outbound.close();
      quotas.close();
      placements?.close();
      await store.close();
      logger.flush?.();
    },
  };
}
