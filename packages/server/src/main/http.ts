// The HTTP server: authentication, the app, and the management API's routes (/v0, identity, console, metrics, the
// model gateway), with the cluster's forwarding of requests to the server that holds what they are about.
import { Counter } from 'prom-client';
import { servingKey } from '../cluster/replica-placements.js';
import { createApp } from '../api/app.js';
import { registerCrud } from '../api/crud.js';
import { type ListedReplica, replicaCount } from '../api/workload-replicas.js';
import { registerIdentityPublicRoutes, registerIdentityRoutes } from '../api/identity.js';
import { registerMetrics } from '../api/metrics.js';
import { metricsAccess } from '../api/metrics-access.js';
import { sandboxSampler } from '../api/sandbox-metrics.js';
import { registerOpenApi } from '../api/openapi.js';
import * as debug from '../api/debug.js';
import * as egressUsage from '../api/egress-usage.js';
import * as previewTokens from '../api/preview-tokens.js';
import * as templateVersions from '../api/volume-template-versions.js';
import * as sandboxSchedules from '../api/sandbox-schedules.js';
import * as scheduleLists from '../api/schedule-lists.js';
import { registerCatalogs } from '../api/catalogs.js';
import { createAuth } from '../auth/index.js';
import { K, keys as authKeys } from '../auth/records.js';
import type { Config } from '../config.js';
import { terminatedRetentionMs } from '../controllers/sandbox/sandbox.js';
import { deleteWhenDone } from '../api/wait.js';
import { referencedImages, register as registerImages } from '../api/images.js';
import { register as registerImageBuilds } from '../api/image-builds.js';
import { register as registerImageShares } from '../api/image-shares.js';
import { register as registerSnapshots } from '../api/snapshots.js';
import { LayerCache } from '../builds/dockerfile/layer-cache.js';
import { sandboxCreateHook, sandboxReplaceHook } from '../api/sandboxes.js';
import { volumeCreateHook } from '../api/volumes.js';
import { KINDS } from '../kinds/index.js';
import { registerTemplates } from '../templates/routes.js';
import { modelGateway } from '../models/http-route.js';
import { UPLOAD_URL_HEADER } from '../api/code-upload.js';
import { CodeCopies, peerToken } from '../builds/code-copies.js';
import { AppCopies } from '../builds/app-copies.js';
import { ImageStore } from '../runtime/images/image-store.js';
import { PeerImages } from '../runtime/images/peer-images.js';
import { otherPeers } from './images-ahead.js';
import { registerRevisionRoutes } from '../api/revisions.js';
import { registerCustomDomains } from '../api/custom-domains.js';
import { txtLookup } from '../outbound/dns-txt.js';
import { registerDriveTokenRoutes } from '../api/drive-tokens.js';
import { registerWorkloadLogRoutes } from '../api/workload-logs.js';
import { registerJobExecutionRoutes } from '../api/job-executions.js';
import { peerTaskLog, registerTaskLogPeerRoute } from '../api/job-task-peer.js';
import { registerQuotas } from '../api/quotas.js';
import { registerWatch } from '../api/watch.js';
import { WatchLimit } from '../api/watch-stream.js';
import { registerCaller } from '../api/caller.js';
import { registerWorkloadReplicaRoutes } from '../api/workload-replicas.js';
import { registerConsole } from '../api/console.js';
import { registerNodes } from '../api/nodes.js';
import { forwardHeldRoutes, type Holder } from '../http/peer-forward.js';
import { heldObjectRequest, heldSandboxOf } from '../api/held-crud.js';
import type { Late } from './context.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';
import type { Workloads } from './workloads.js';

const MB = 1024 ** 2;

export async function createHttp(config: Config, parts: Core) {
  const { store, logger, box, baseUrl } = parts;
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
  return { capacity, auth, app, routes };
}

export type Http = Awaited<ReturnType<typeof createHttp>>;

export async function registerRoutes(config: Config, late: Late, parts: Core & Runtime & Http & Workloads) {
  const { store, logger, outbound, resources, quotas, placements, replicaPlacements, selfId, masterKey } =
    parts;
  const { images, driver, instances, snapshotLayers, snapshots } = parts;
  const { capacity, auth, app } = parts;
  const { code, builder, replicas, uploads, executions, jobs } = parts;
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
          ((await late.nodes?.list()) ?? [])
            .filter((n) => n.healthy && n.id !== selfId)
            .map((n) => n.address),
      })
    : undefined;
  codeCopies?.register(app);
  await codeCopies?.start();
  // In a cluster a built app is built once: every other node that needs it copies it from a node holding it, checked
  // against the digest recorded at its build (builds/app-copies.ts, decision 094). Each node gives its own apps
  // whatever BERTH_APP_COPIES says; with it false, this node builds what it runs itself.
  const appCopies = config.databaseUrl
    ? new AppCopies({
        dataDir: config.dataDir,
        builder,
        token: peerToken(masterKey),
        peers: otherPeers(late, selfId),
        logger,
        // An app built from a Dockerfile is its image: given if held here, copied through the image routes.
        images: {
          holds: (ws, id) => images.find(ws, id)?.id === id,
          copy: async (ws, id, name, peer) =>
            (await peerImages?.copyAhead(ws, id, [ImageStore.parse(name).canonical], [peer])) === true,
        },
      })
    : undefined;
  appCopies?.register(app);
  if (config.appCopies) builder.copyFrom(appCopies);
  // In a cluster, the server leading the controllers holds the instances they start (and the files they leave:
  // uploaded code, build and job logs, images, replicas), and each sandbox's node holds it: the other servers send
  // requests about those there (http/peer-forward.ts).
  const clusterHolder: Holder | undefined = config.databaseUrl
    ? {
        decide: () => late.holder?.decide() ?? { here: true },
        decideSandbox: (ws, name) => late.holder?.decideNode(placements?.nodeOf(ws, name)) ?? { here: true },
        decideReplica: (kind, ws, name, avoid, sticky) =>
          late.holder?.decideReplica(
            servingKey(kind, ws, name),
            replicaPlacements?.nodesOf(kind, ws, name) ?? [],
            replicas.get(ws, kind, name)?.replicas.some((r) => !r.gone) === true,
            avoid,
            sticky,
          ),
        self: selfId,
        changed: () => late.holder?.changed() ?? new Promise((r) => setTimeout(r, 500)),
      }
    : undefined;
  // In a cluster, a sandbox placed on a node lacking its workspace's image gets it from the leader, whose image store
  // holds the workspace's images and names (runtime/images/peer-images.ts, decision 081).
  // Every other node copies them ahead (main/images-ahead.ts); while the leader cannot be asked, a node resolves a
  // name in its own copies or at any node holding it (decision 087).
  const peerImages = clusterHolder
    ? new PeerImages({
        images,
        token: peerToken(masterKey),
        holder: clusterHolder.decide,
        peers: otherPeers(late, selfId),
      })
    : undefined;
  peerImages?.register(app);
  // The live output of the job tasks running on this node, for the leader following them (decision 093).
  if (clusterHolder) registerTaskLogPeerRoute(app, { instances, token: peerToken(masterKey) });
  const remoteTaskLog = clusterHolder
    ? (
        workspace: string,
        node: string,
        sandbox: string,
        write: (text: string) => void,
        signal: AbortSignal,
        onOpen: () => void,
      ) => {
        const address = late.holder?.node(node)?.address;
        if (!address) return Promise.resolve(false);
        return peerTaskLog(address, peerToken(masterKey), workspace, sandbox, write, signal, onOpen);
      }
    : undefined;
  const holdsImage = peerImages && ((ws: string, id: string) => peerImages.holds(ws, id));
  // An image write is answered once another node holds it too, within BERTH_IMAGE_COPY_WAIT_S (decision 087).
  const secondCopy = peerImages
    ? async (ws: string, refs: string[]) =>
        late.imagesAhead?.secondCopy(ws, refs, config.imageCopyWaitS * 1000)
    : undefined;
  // …and a delete once the others let go of its names (a new leader would otherwise bring them back).
  const letGo = peerImages
    ? async (ws: string, names: string[]) => late.imagesAhead?.letGo(ws, names, config.imageCopyWaitS * 1000)
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
  // An agent's or function's replicas, counted and listed over every node of a cluster: this server's, and the other
  // healthy nodes' as their last heartbeat published them (decision 092).
  const clusterNode = config.databaseUrl ? selfId : undefined;
  const replicaList = {
    replicas,
    self: clusterNode,
    elsewhere: clusterNode
      ? (kind: string, ws: string, name: string) => {
          const key = servingKey(kind, ws, name);
          const out: ListedReplica[] = [];
          for (const n of late.holder?.nodes() ?? []) {
            if (n.id === clusterNode || !n.healthy) continue;
            for (const r of n.replicas?.[key] ?? []) out.push({ ...r, node: n.id });
          }
          return out;
        }
      : undefined,
  };
  // Open watches per workspace, whichever route streams them (api/watch-stream.ts).
  const watches = new WatchLimit();
  await app.register(
    async (v0) => {
      // A single server holds everything: no hook at all (each hook Fastify runs costs every request).
      if (clusterHolder) v0.addHook('onRequest', forwardHeldRoutes(clusterHolder, heldObjectRequest));
      registerCrud(v0, KINDS, {
        resources,
        watch: { authenticator: auth.authenticator, limit: watches },
        createHooks: {
          Sandbox: sandboxCreateHook({ resources, images, holdsImage }),
          Volume: volumeCreateHook({ resources, capacity }),
          Drive: volumeCreateHook({ resources, capacity }, 'Drive'),
        },
        replaceHooks: { Sandbox: sandboxReplaceHook({ resources, images, holdsImage }) },
        deleteHooks: {
          Sandbox: deleteWhenDone(resources, (o) => terminatedRetentionMs(o.body) > 0),
          Volume: deleteWhenDone(resources),
          Drive: deleteWhenDone(resources),
        },
        afterWrite: { Agent: uploadUrl, Function: uploadUrl, Job: uploadUrl },
        decorate: {
          Agent: replicaCount(replicaList),
          Function: replicaCount(replicaList),
          Application: replicaCount(replicaList),
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
        registerJobExecutionRoutes(held, { resources, runner: jobs, remoteLog: remoteTaskLog });
        templateVersions.register(held, { resources, dataDir: config.dataDir });
        registerImages(held, {
          images,
          resources,
          referenced: (ws) => referencedImages(store, ws),
          clearBuildCache: (ws) => new LayerCache(config.dataDir, ws).clear(),
          secondCopy,
          letGo,
        });
        registerImageShares(held, {
          images,
          workspaceExists: async (ws) => (await store.get(authKeys.workspace(ws))) !== undefined,
          secondCopy,
        });
        registerImageBuilds(held, { dataDir: config.dataDir, instances, images, secondCopy });
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
        registerWorkloadReplicaRoutes(held, { resources, ...replicaList });
        registerSnapshots(held, { resources, snapshots, images, secondCopy });
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
      registerNodes(v0, {
        nodes: () => late.nodes,
        sandboxesOn: placements && ((node) => placements.load(node).sandboxes),
      });
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
  if (appCopies) {
    const copies = new Counter({
      name: 'berth_app_copies_total',
      help: 'Built apps this server copied from another node instead of building them (copied), and copies it refused: bytes other than the recorded digest, or cut (refused)',
      labelNames: ['outcome'] as const,
      registers: [metrics],
    });
    for (const o of ['copied', 'refused'] as const) copies.labels(o).inc(0);
    appCopies.counted = (o) => copies.labels(o).inc();
  }
  await app.register(modelGateway, {
    resources,
    authenticator: auth.authenticator,
    outbound,
    registry: metrics,
    upstreamTimeoutMs: config.modelTimeoutMs,
    outputEstimate: config.modelOutputEstimate,
  });
  return { clusterHolder, codeCopies, peerImages, metrics };
}
