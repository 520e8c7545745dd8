// Which server holds what (docs/decisions/056-cluster-postgres.md, 059-cluster-placement.md): the server leading the
// controllers (leadership.ts) holds the instances they start (replicas, tasks, builds, volumes); each sandbox is held
// by the node it is placed on (placement.ts). The gateways and held routes of the other servers send requests there.
// Read from the node list in the background, so deciding costs a request nothing.
import type { Avoided, HolderDecision } from '../http/peer-forward.js';
import type { Leadership } from './leadership.js';
import type { NodeView, Nodes } from './nodes.js';
import type { ReplicaCandidate } from './replica-placements.js';
import type { VolumeNodes } from './volume-nodes.js';
import {
  choose,
  type Load,
  leastLoaded,
  NoNodeError,
  type PlacedBody,
  volumeNamesOf,
  type RegionPool,
  regionPools,
  type SandboxPlacements,
  warmKeyOf,
} from './placement.js';

const HERE: HolderDecision = { here: true };

/** A string's FNV-1a hash: the same pick for the same thread or session on every server. */
function hashOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export interface InstanceHolder {
  /** Where what the controllers' leader holds is served. */
  decide(): HolderDecision;
  /** Where what node `node` holds is served (here when it is this one, or when `node` is undefined). */
  decideNode(node: string | undefined): HolderDecision;
  /**
   * The node a new sandbox is placed on (body as it is to be stored): one serving its `spec.region`. Throws
   * NoNodeError when no node of that region can take it (it is never placed in another region).
   */
  place(body: PlacedBody, workspace?: string): string;
  /** Every region a node of the cluster serves, as of the last read of the node list (this server's among them). */
  regions(): ReadonlySet<string>;
  /**
   * The nodes a replica of workload `key` (servingKey) asking for `body.spec.region` may be placed on: healthy,
   * undrained, of its region (docs/decisions/086-replicas-across-nodes.md).
   */
  replicaCandidates(body: PlacedBody, key: string): ReplicaCandidate[];
  /**
   * The node an attempt of a job task goes to (docs/decisions/093-job-tasks-across-nodes.md): the least loaded of the
   * healthy, undrained nodes serving `region` (any node when undefined) that `room` accepts, on their sandboxes plus
   * the runner's `tasks` there; undefined when none can take it now. Before the first read of the list, this server.
   */
  placeTask(
    region: string | undefined,
    tasks: (node: string) => Load,
    room: (node: string) => boolean,
  ): string | undefined;
  /** How many nodes may take job tasks now: the healthy, undrained ones (1 before the list was read). */
  taskNodes(): number;
  /** Whether `node`'s lease lapsed (or it left the list): what it ran is gone. False until the list was read once. */
  lapsed(node: string): boolean;
  /** Whether a replica slot on `node` stays there: it must not leave (mustLeave) and serves the body's region. */
  keepsReplica(node: string, body: PlacedBody): boolean;
  /** The node as of the last read of the list; undefined when it is not on it. */
  node(id: string): NodeView | undefined;
  /**
   * The workspace quota settings the leader of the controllers publishes (decision 092), which every node judges
   * with; undefined while this server leads (its own are the leader's) or no leader is listed.
   */
  leaderQuotas(): Record<string, number> | undefined;
  /** Every node as of the last read of the list. */
  nodes(): NodeView[];
  /**
   * Where a request to workload `key` goes: here when `liveHere` (this server has a live replica of it); else a
   * healthy node of `placed` (its replica slots) whose origin `refused` does not hold, those whose last beat said they serve it first
   * (`sticky` picks one the same way on every server: a thread's or MCP session's requests stay on one node); else
   * here when it is placed here (it scales from zero); undefined when it is not placed (the leader serves it).
   */
  decideReplica(
    key: string,
    placed: readonly string[],
    liveHere: boolean,
    refused: Avoided,
    sticky?: string,
  ): HolderDecision | undefined;
  /**
   * Whether the sandboxes placed on `node` must be placed again: the node list was read, and that node is not on
   * it, its lease lapsed (stopped cleanly or not: one restarted within its lease keeps them), or it was drained;
   * `''` (not placed yet) must be placed. False until the list was read once.
   */
  mustLeave(node: string): boolean;
  /** Resolves after the next read of the node list (a request waiting out a failover decides again then). */
  changed(): Promise<void>;
  close(): void;
}

export async function instanceHolder(o: {
  nodes: Nodes;
  leadership: Leadership;
  placements: SandboxPlacements;
  /** The node holding each volume's data (decision 102); none: volumes go with the leader. */
  volumeNodes?: Pick<VolumeNodes, 'nodesOf'>;
  role: string;
  /** This server's region aliases (BERTH_REGION_ALIASES): a name no node serves stands for the region it names. */
  aliases?: Readonly<Record<string, string>>;
  refreshMs?: number;
  warn: (err: unknown, msg: string) => void;
}): Promise<InstanceHolder> {
  const self = o.nodes.self.id;
  let leader: NodeView | undefined;
  let byId = new Map<string, NodeView>();
  // Placement's pools by region, and every region named by a node, made at each read of the list.
  let pools = new Map<string, RegionPool>();
  let anywhere: RegionPool = { all: [], warm: new Map() };
  const selfRegions = o.nodes.self.regions?.length ? o.nodes.self.regions : [o.nodes.self.region];
  let known: ReadonlySet<string> = new Set(selfRegions);
  let read = false;
  /** The region a sandbox asks for, as the nodes name it: a name no node serves may be an alias of one. */
  const regionOf = (body: PlacedBody): string | undefined => {
    const name = body.spec?.region;
    if (typeof name !== 'string') return undefined;
    return known.has(name) ? name : (o.aliases?.[name] ?? name);
  };
  /** `id` when that node serves `region`; else the sandbox cannot be placed. */
  const inRegion = (id: string, region: string | undefined, why: string) => {
    if (region === undefined) return id;
    const n = id === self ? undefined : byId.get(id);
    const serves = n ? n.regions.includes(region) : selfRegions.includes(region);
    if (!serves) throw new NoNodeError(region, why);
    return id;
  };
  const addresses = new Map<string, URL>();
  const addressOf = (n: NodeView) => {
    let u = addresses.get(n.address);
    if (!u) {
      u = new URL(n.address);
      addresses.set(n.address, u);
    }
    return u;
  };
  let readers: (() => void)[] = [];
  const refresh = async () => {
    try {
      const list = await o.nodes.list();
      byId = new Map(list.map((n) => [n.id, n]));
      leader = list.find((n) => n.healthy && n.leads.includes(o.role));
      const healthy = list.filter((n) => n.healthy && !n.drained);
      pools = regionPools(
        healthy,
        (n) => n.regions,
        (n) => n.warm,
      );
      anywhere = regionPools(
        healthy,
        () => [''],
        (n) => n.warm,
      ).get('') ?? { all: [], warm: new Map() };
      known = new Set([...selfRegions, ...list.flatMap((n) => n.regions)]);
      read = true;
    } catch (err) {
      o.warn(err, 'could not read the nodes of the cluster');
    }
    const told = readers;
    readers = [];
    for (const r of told) r();
  };
  await refresh();
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void refresh().finally(() => {
      running = false;
    });
  }, o.refreshMs ?? 500);
  timer.unref();
  return {
    leaderQuotas() {
      if (o.leadership.leads().includes(o.role) || !leader || leader.id === self) return undefined;
      return leader.quotas && Object.keys(leader.quotas).length ? leader.quotas : undefined;
    },
    decide() {
      if (o.leadership.leads().includes(o.role)) return HERE;
      if (leader && leader.id !== self) return { peer: addressOf(leader) };
      return {
        unavailable:
          'no server of the cluster holds instances now (another takes over within seconds of the last one stopping); try again',
      };
    },
    decideNode(node) {
      if (node === undefined || node === self) return HERE;
      const n = byId.get(node);
      if (n?.healthy) return { peer: addressOf(n) };
      return {
        unavailable: `node ${node}, which holds this sandbox, is not answering; the cluster starts the sandbox again on another node once its lease lapses`,
      };
    },
    place(body, workspace) {
      const region = regionOf(body);
      // Snapshot layers are on the disk of the server that captured them, which is the one creating the sandbox
      // (snapshot routes are served by the node holding the snapshotted sandbox); volumes on their node's.
      if (body.rootLayers?.length)
        return inRegion(self, region, 'its snapshot is on a node of another region');
      const volumes = volumeNamesOf(body);
      if (volumes.length) {
        const on = workspace === undefined ? [] : (o.volumeNodes?.nodesOf(workspace, volumes) ?? []);
        if (on.length > 1)
          throw new NoNodeError(
            region,
            `its volumes are on different nodes (${on.join(', ')}), and a volume's data stays on the node that made it`,
          );
        const [id] = on;
        if (id !== undefined) {
          const n = byId.get(id);
          if (read && (!n?.healthy || n.drained))
            throw new NoNodeError(
              region,
              `its volumes are on node ${id}, which is ${!n ? 'not in the cluster' : n.drained ? 'drained' : 'not answering'} (a volume's data stays on the node that made it)`,
            );
          return inRegion(id, region, `its volumes are on node ${id}, which is of another region`);
        }
        // Volumes not made yet go with the leader, which makes them.
        const maker = o.leadership.leads().includes(o.role) ? self : (leader?.id ?? self);
        return inRegion(
          maker,
          region,
          'a sandbox with volumes runs on the node leading the controllers, which is of another region',
        );
      }
      const memory = Number(body.spec?.runtime?.memory) || 0;
      const warm = warmKeyOf(body);
      // A sandbox made before regions were placed (none in its spec) may go to any node.
      if (region === undefined) return choose(anywhere, warm, memory, o.placements.load) ?? self;
      const pool = pools.get(region);
      const id = pool && choose(pool, warm, memory, o.placements.load);
      if (id) return id;
      // Before the first read of the list, this server places on itself when it serves the region.
      if (!read && selfRegions.includes(region)) return self;
      throw new NoNodeError(
        region,
        known.has(region)
          ? 'none of its nodes is healthy and undrained; try again once one is'
          : 'no node of the cluster serves it',
      );
    },
    regions: () => known,
    placeTask(region, tasks, room) {
      if (!read) return room(self) ? self : undefined;
      const name = region === undefined ? undefined : regionOf({ spec: { region } });
      const pool = name === undefined ? anywhere : pools.get(name);
      const all = (pool?.all ?? []).filter((c) => room(c.id));
      const load = (id: string): Load => {
        const s = o.placements.load(id);
        const t = tasks(id);
        return { sandboxes: s.sandboxes + t.sandboxes, memoryMb: s.memoryMb + t.memoryMb };
      };
      return leastLoaded(all, load);
    },
    taskNodes: () => (read ? Math.max(1, anywhere.all.length) : 1),
    lapsed(node) {
      // Its own lease this node knows first-hand (its renewals landing or not), where the list read last may be half
      // a second old: under load a leader read itself as lapsed there and took its own running attempts for lost.
      if (node === self) return o.nodes.fence() === undefined;
      if (!read) return false;
      return !byId.get(node)?.leased;
    },
    replicaCandidates(body, key) {
      const region = regionOf(body);
      const pool = region === undefined ? anywhere : pools.get(region);
      return (pool?.all ?? []).map((c) => {
        const n = byId.get(c.id);
        return {
          id: c.id,
          cores: c.cores,
          sandboxes: o.placements.load(c.id).sandboxes,
          built: !!n && (n.leads.includes(o.role) || (n.serving ?? []).includes(key)),
        };
      });
    },
    keepsReplica(node, body) {
      if (!read) return true;
      const n = byId.get(node);
      if (!n?.leased || n.drained) return false;
      const region = regionOf(body);
      return region === undefined || n.regions.includes(region);
    },
    node: (id) => byId.get(id),
    nodes: () => [...byId.values()],
    decideReplica(key, placed, liveHere, refused, sticky) {
      if (liveHere && sticky === undefined) return HERE;
      if (placed.length === 0) return liveHere ? HERE : undefined;
      const up: NodeView[] = [];
      for (const id of placed) {
        if (id === self) continue;
        const n = byId.get(id);
        if (n?.healthy && !refused.has(addressOf(n).origin) && !up.includes(n)) up.push(n);
      }
      const ready: (NodeView | undefined)[] = up.filter((n) => (n.serving ?? []).includes(key));
      // undefined stands for this server: a sticky pick sorts every server's candidates the same way.
      if (liveHere) ready.push(undefined);
      if (ready.length === 0) {
        if (placed.includes(self)) return HERE;
        if (up.length) return { peer: addressOf(up[Math.floor(Math.random() * up.length)]) };
        // Every node placed is gone or refused: another still serving it (a slot just moved away) may answer.
        const any = [...byId.values()].find(
          (n) =>
            n.id !== self &&
            n.healthy &&
            !refused.has(addressOf(n).origin) &&
            (n.serving ?? []).includes(key),
        );
        if (any) return { peer: addressOf(any) };
        const [kind, , name] = key.split('/');
        return {
          unavailable: `no node holding a replica of ${kind.toLowerCase()} ${JSON.stringify(name)} is answering; the cluster starts its replicas on another node once their node's lease lapses`,
        };
      }
      let n: NodeView | undefined;
      if (sticky === undefined) n = ready[Math.floor(Math.random() * ready.length)];
      else {
        ready.sort((x, y) => ((x?.id ?? self) < (y?.id ?? self) ? -1 : 1));
        n = ready[hashOf(sticky) % ready.length];
      }
      return n ? { peer: addressOf(n) } : HERE;
    },
    mustLeave(node) {
      if (!read) return false;
      if (node === '') return true;
      const n = byId.get(node);
      return !n?.leased || n.drained;
    },
    changed: () => new Promise<void>((r) => readers.push(r)),
    close: () => clearInterval(timer),
  };
}
