// Listening, then this server's place among the nodes: the first admin key, its node record and, in a cluster, the
// holder of the controllers' instances.
import { cpus, hostname, totalmem } from 'node:os';
import type { Config } from '../config.js';
import { localNodes, postgresNodes } from '../cluster/nodes.js';
import { postgresQuotaLeases } from '../cluster/quota-leases.js';
import { instanceHolder } from '../cluster/instance-holder.js';
import { servingKey } from '../cluster/replica-placements.js';
import { localReplicas } from '../api/workload-replicas.js';
import type { SandboxPlacements } from '../cluster/placement.js';
import { keepPlaced } from '../controllers/sandbox/sandbox.js';
import type { ResourceKey } from '../store/store.js';
import type { Late } from './context.js';
import type { Controllers } from './controllers.js';
import type { Gateway } from './gateway.js';
import type { Http } from './http.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';
import type { Workloads } from './workloads.js';

const MB = 1024 ** 2;

/** A listen address others can reach: a wildcard one stands for the machine's name. */
const peerHost = (host: string) =>
  host === '0.0.0.0' || host === '::' ? hostname() : host.includes(':') ? `[${host}]` : host;

export async function listenAndJoin(
  config: Config,
  late: Late,
  gateway: Gateway,
  parts: Core &
    Runtime &
    Http &
    Pick<Workloads, 'replicas'> &
    Pick<Controllers, 'leadership' | 'sandboxControllers'>,
) {
  const { logger, store, placements, volumeNodes, selfId } = parts;
  const { instances } = parts;
  const { auth, app } = parts;
  const { leadership, sandboxControllers } = parts;
  await app.listen({ host: config.host, port: config.port });
  const addr = app.server.address();
  late.actualPort = typeof addr === 'object' && addr ? addr.port : config.port;
  const bootstrap = await auth.bootstrap();
  let placedHere: ResourceKey[] = [];
  const nodeOpts = {
    self: {
      id: selfId,
      // Not the public URL: in a cluster that is the address in front of every server, and a request sent on must
      // reach this one.
      address: config.peerUrl ?? `http://${peerHost(config.host)}:${late.actualPort}`,
      region: config.regions[0],
      regions: config.regions,
      cores: cpus().length,
      memoryMb: Math.floor(totalmem() / MB),
      quotas: { ...config.quotas },
    },
    instances: async () => (await instances.list()).filter((i) => i.state !== 'dead').length,
    warm: () => instances.driver.warm?.() ?? {},
    leads: () => leadership.leads(),
    // The replicas it runs as leader, for the next leader to tell their objects if this node dies or is drained.
    ran: () => (leadership.leads().includes('controllers') ? parts.replicas.running() : undefined),
    // The agents and functions it has a live replica of, which the other gateways send requests to (decision 086).
    serving: () => parts.replicas.running().map(([kind, ws, name]) => servingKey(kind, ws, name)),
    // And each one's replicas, which every server counts and lists an agent's replicas from (decision 092).
    replicas: () =>
      Object.fromEntries(
        parts.replicas
          .running()
          .map(([kind, ws, name]) => [
            servingKey(kind, ws, name),
            localReplicas(parts.replicas, ws, kind, name),
          ]),
      ),
    // A role is claimed only while its lock session holds it (decision 080).
    leadFence: (role: string) => leadership.fence(role),
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
  late.nodes = config.databaseUrl ? await postgresNodes(config.databaseUrl, nodeOpts) : localNodes(nodeOpts);
  if (config.databaseUrl) {
    // Each workspace's replicas, builds and tasks counted over every node (decision 092).
    const nodes = late.nodes;
    late.quotaLeases = await postgresQuotaLeases(config.databaseUrl, {
      self: selfId,
      fence: () => nodes.fence(),
      warn: (err, msg) => logger.warn({ err }, msg),
    });
    await parts.quotas.readOthers().catch((err) => logger.warn({ err }, 'could not read the quota leases'));
    parts.quotas.followOthers();
  }
  if (config.databaseUrl) {
    const nodes = late.nodes;
    const ours: Record<string, number> = { ...config.quotas };
    const told = new Set<string>();
    // Every node judges with the leader's BERTH_QUOTA_* settings (decision 092): a node whose settings differ would
    // change them for the whole cluster when it leads. Said once per node (and start of it) whose differ.
    const compare = () =>
      nodes
        .list()
        .then((all) => {
          for (const n of all) {
            const key = `${n.id}@${n.epoch}`;
            // A node of a version that does not publish its quotas has none listed: nothing to compare.
            const theirs = n.quotas ?? {};
            if (n.id === selfId || !n.healthy || !Object.keys(theirs).length || told.has(key)) continue;
            if (sameQuotas(theirs, ours)) continue;
            told.add(key);
            logger.warn(
              { node: n.id, theirs, ours },
              `node ${n.id} judges workspace quotas with other BERTH_QUOTA_* settings than this server (${JSON.stringify(theirs)} there, ${JSON.stringify(ours)} here): the cluster judges with the leader's, so a change of leader changes them; give every server of the cluster the same`,
            );
          }
        })
        .catch((err) => logger.warn({ err }, 'could not compare the quotas of the nodes'));
    void compare();
    setInterval(compare, QUOTA_COMPARE_MS).unref();
  }
  if (config.databaseUrl)
    late.holder = await instanceHolder({
      nodes: late.nodes,
      leadership,
      placements: placements as SandboxPlacements,
      volumeNodes,
      role: 'controllers',
      aliases: config.regionAliases,
      warn: (err, msg) => logger.warn({ err }, msg),
    });
  return bootstrap;
}

/** How often a server compares its quota settings with the other nodes'. */
const QUOTA_COMPARE_MS = 60_000;

function sameQuotas(a: Record<string, number>, b: Record<string, number>): boolean {
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].every((k) => a[k] === b[k]);
}
