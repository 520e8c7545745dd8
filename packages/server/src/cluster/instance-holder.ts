// Which server holds what (docs/decisions/056-cluster-postgres.md, 059-cluster-placement.md): the server leading the
// controllers (leadership.ts) holds the instances they start (replicas, tasks, builds, volumes); each sandbox is held
// by the node it is placed on (placement.ts). The gateways and held routes of the other servers send requests there.
// Read from the node list in the background, so deciding costs a request nothing.
import type { HolderDecision } from '../http/peer-forward.js';
import type { Leadership } from './leadership.js';
import type { NodeView, Nodes } from './nodes.js';
import {
  bestOf,
  type Candidate,
  type PlacedBody,
  placedOnLeader,
  type SandboxPlacements,
} from './placement.js';

const HERE: HolderDecision = { here: true };

export interface InstanceHolder {
  /** Where what the controllers' leader holds is served. */
  decide(): HolderDecision;
  /** Where what node `node` holds is served (here when it is this one, or when `node` is undefined). */
  decideNode(node: string | undefined): HolderDecision;
  /** The node a new sandbox is placed on (body as it is to be stored). */
  place(body: PlacedBody): string;
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
  role: string;
  refreshMs?: number;
  warn: (err: unknown, msg: string) => void;
}): Promise<InstanceHolder> {
  const self = o.nodes.self.id;
  let leader: NodeView | undefined;
  let byId = new Map<string, NodeView>();
  let candidates: Candidate[] = [];
  let read = false;
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
      candidates = list.filter((n) => n.healthy && !n.drained);
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
    place(body) {
      // Snapshot layers are on the disk of the server that captured them, which is the one creating the sandbox
      // (snapshot routes are served by the node holding the snapshotted sandbox); volumes and images on the leader's.
      if (body.rootLayers?.length) return self;
      if (placedOnLeader(body)) return o.leadership.leads().includes(o.role) ? self : (leader?.id ?? self);
      return bestOf(candidates, o.placements.load) ?? self;
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
