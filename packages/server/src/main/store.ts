// The server's foundations, first at start: logger, data dir and keys, the outbound client, the store and this node's
// place in a cluster, quotas, the resources pipeline and the OAuth2 connection tokens.
import pino from 'pino';
import { loadMasterKey } from '../crypto/master-key.js';
import { SecretBox } from '../crypto/secret-box.js';
import { type Config, regionNames } from '../config.js';
import { SANDBOX_NET } from '../runtime/index.js';
import { Outbound } from '../outbound/index.js';
import { hostLabelsOf, LABELED_KINDS, runUrlOf } from '../gateway/address.js';
import { KINDS } from '../kinds/index.js';
import { LOG_REDACT_PATHS, logRequest } from '../log-redact.js';
import { secureDataDir } from '../store/data-dir.js';
import { backfillLabels } from '../store/host-labels.js';
import { Resources } from '../store/resources.js';
import { agreeOnMasterKey } from '../store/master-key-check.js';
import { openStore } from '../store/open.js';
import { ConnectionTokens } from '../oauth/connection-tokens.js';
import { QuotaLedger } from '../controllers/core/quota-ledger.js';
import { quotaAdmission } from '../controllers/core/quota-admission.js';
import { nodeId } from '../cluster/nodes.js';
import { NoNodeError, SandboxPlacements } from '../cluster/placement.js';
import { VolumeNodes } from '../cluster/volume-nodes.js';
import { ReplicaPlacements } from '../cluster/replica-placements.js';
import type { InstanceHolder } from '../cluster/instance-holder.js';
import { ApiError } from '../errors.js';
import { fencedStore, leaderFencedStore } from '../cluster/fencing.js';
import { CONTROLLERS } from '../cluster/leadership.js';
import type { Late, StartOptions } from './context.js';

/** The node a new sandbox goes to; none of its region can take it: 503 naming the region (decision 077). */
function placed(holder: InstanceHolder, body: any, workspace: string): string {
  try {
    return holder.place(body, workspace);
  } catch (err) {
    if (err instanceof NoNodeError)
      throw new ApiError('UNAVAILABLE', err.message, { headers: { 'retry-after': '5' } });
    throw err;
  }
}

export async function openCore(config: Config, opts: StartOptions, late: Late) {
  const loosened = secureDataDir(config.dataDir);
  const logger = pino(
    {
      level: config.logLevel,
      redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' },
      // Fastify takes a logger's own `req` serializer over its default: request lines never carry a token in the URL.
      serializers: { req: logRequest },
    },
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
  // And where each volume's data is (decision 102): what mounts a volume runs on its node.
  const volumeNodes = config.databaseUrl ? new VolumeNodes(store) : undefined;
  await volumeNodes?.start();
  // And of agents' and functions' replica slots (decision 086).
  const replicaPlacements = config.databaseUrl ? new ReplicaPlacements(store) : undefined;
  await replicaPlacements?.start();
  // Each workspace's quotas (decision 040): what its sandboxes ask for, what runs for it; judged at every write.
  // In a cluster, counted over every node in the database once this one joined (decision 092).
  const quotas = new QuotaLedger(
    store,
    config.quotas,
    config.databaseUrl
      ? {
          leases: () => late.quotaLeases,
          warn: (err, msg) => logger.warn({ err }, msg),
          // One set of settings for the cluster: the leader's (decision 092).
          leaderLimits: () => late.holder?.leaderQuotas(),
        }
      : undefined,
  );
  await quotas.start();
  const baseUrl = () => config.publicUrl ?? `http://${config.host}:${late.actualPort}`;
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
    placeOf: (kd, body, workspace) =>
      kd.kind === 'Sandbox' && late.holder ? { node: placed(late.holder, body, workspace) } : undefined,
    nodeRegions: () => late.holder?.regions(),
  });
  // What a node writes as the holder of a sandbox is fenced on its placement and the node's lease (decision 064); a
  // node without a lease starts, wakes and writes nothing for its sandboxes.
  const held = clusterSelf
    ? resources.withStore(
        fencedStore(
          store,
          { fence: () => late.nodes?.fence(), refused: () => late.nodes?.refused() },
          // And a job task's end its node reports (decision 093): fenced on the task's `node` the same way.
          (k) => k.kind === 'Sandbox' || k.kind === 'JobTask',
        ),
      )
    : resources;
  // What a node writes about the agents' and functions' replicas placed on it (their events), fenced the same way on
  // their `replicaNodes` (decision 092).
  const heldWorkloads = clusterSelf
    ? resources.withStore(
        fencedStore(
          store,
          { fence: () => late.nodes?.fence(), refused: () => late.nodes?.refused() },
          (k) => k.kind === 'Agent' || k.kind === 'Function' || k.kind === 'Application',
        ),
      )
    : resources;
  const holding = () => clusterSelf === undefined || late.nodes?.fence() !== undefined;
  // What the leader of the controllers runs writes only while its lock session holds the lead (decision 068): a
  // leader cut from that session writes nothing beside the next one, and stops at its first refused write.
  const led = config.databaseUrl
    ? resources.withStore(
        leaderFencedStore(store, {
          fence: () => late.leadership?.fence(CONTROLLERS),
          refused: (err) => late.leadership?.refused(CONTROLLERS, err),
        }),
      )
    : resources;
  // OAuth2 connections' access tokens (decision 049): refreshed through `outbound`, kept fresh for running workloads.
  const tokens = new ConnectionTokens({ resources, outbound, dataDir: config.dataDir, logger });
  tokens.start();
  // Objects stored before the address table existed get their labels (a no-op on every later start).
  await backfillLabels(store, LABELED_KINDS, hostLabelsOf, (o, msg) => logger.warn(o, msg));
  return {
    logger,
    box,
    outbound,
    store,
    selfId,
    clusterSelf,
    placements,
    volumeNodes,
    replicaPlacements,
    quotas,
    baseUrl,
    resources,
    held,
    heldWorkloads,
    holding,
    led,
    masterKey,
    tokens,
  };
}

export type Core = Awaited<ReturnType<typeof openCore>>;
