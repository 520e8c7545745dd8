// Where a cluster's agent, function and application replicas run (docs/decisions/086-replicas-across-nodes.md). Each placed
// workload records one node per replica slot it keeps (`replicaNodes`, a read-only field written by the controllers'
// leader), the way a sandbox records its `node`. Every server keeps the same in-memory index of those fields from the
// change feed: the leader places from it, each node knows what it holds, and a gateway sends a request to a node
// holding one without a database round trip.
import { APPLICATION_MAX_SCALE, APPLICATION_MIN_SCALE, boundSandbox } from '../kinds/application.js';
import { isGone } from '../kinds/status.js';
import { followKinds } from '../store/follow-kinds.js';
import type { Store, StoredObject } from '../store/store.js';

/** The kinds whose replicas are placed across nodes. */
export const PLACED_KINDS = ['Agent', 'Function', 'Application'] as const;

/** `<kind>/<workspace>/<name>`: how a workload is named in the index and in a node's `serving` report. */
export const servingKey = (kind: string, workspace: string, name: string) => `${kind}/${workspace}/${name}`;

/**
 * Whether a workload's replicas are placed across nodes: an agent or function without volumes (made on the leader's
 * disk), or an application that runs its image (one bound to a sandbox runs nothing). Another one keeps running on
 * the controllers' leader only. Integration connections move with the replicas: each node holding one keeps its
 * OAuth2 tokens in its own files, refreshed once for the cluster (decision 101).
 */
export function placeable(o: StoredObject): boolean {
  if (!(PLACED_KINDS as readonly string[]).includes(o.kind)) return false;
  const spec = o.body.spec ?? {};
  if (o.kind === 'Application') return boundSandbox(spec) === undefined;
  return !spec.volumes?.length;
}

/** A workload's scale: an agent's or function's `runtime`; an application's is fixed (one always runs). */
function scaleOf(o: StoredObject): { min: number; max: number } {
  if (o.kind === 'Application') return { min: APPLICATION_MIN_SCALE, max: APPLICATION_MAX_SCALE };
  return {
    min: Number(o.body.spec?.runtime?.minScale) || 0,
    max: Math.max(1, Number(o.body.spec?.runtime?.maxScale) || 10),
  };
}

/** Replica slots a workload keeps placed: its minScale, at least one (where it scales from zero). */
export const slotsOf = (o: StoredObject) => Math.max(1, scaleOf(o).min);

/** Whether the workload serves (so its slots are kept placed): enabled, not deleted, with a deployed revision. */
export const serves = (o: StoredObject) =>
  !isGone(o) && o.body.spec?.enabled !== false && typeof o.body.activeRevision === 'string';

/**
 * The part of its workload's scale one node runs, from the object's `replicaNodes`: as many replicas at least as
 * slots placed on it (none when minScale is 0: it scales from zero there), and its share of maxScale. Undefined when
 * the node holds no slot.
 */
export function shareOf(o: StoredObject, node: string): { minScale: number; maxScale: number } | undefined {
  const nodes: string[] = Array.isArray(o.body.replicaNodes) ? o.body.replicaNodes : [];
  const mine = nodes.filter((n) => n === node).length;
  if (mine === 0) return undefined;
  const { min, max } = scaleOf(o);
  return {
    minScale: min > 0 ? mine : 0,
    maxScale: Math.max(mine, Math.ceil((max * mine) / nodes.length)),
  };
}

interface Entry {
  nodes: string[];
  /** The object as last seen (the leader places from it). */
  o: StoredObject;
}

/** Every placed kind's nodes and each node's replica slots, kept from the store's change feed. */
export class ReplicaPlacements {
  private readonly byKey = new Map<string, Entry>();
  private readonly slots = new Map<string, number>();
  private unwatch?: () => void;

  constructor(private readonly store: Store) {}

  async start(): Promise<void> {
    this.unwatch = await followKinds(
      this.store,
      PLACED_KINDS,
      (o) => servingKey(o.kind, o.workspace, o.name),
      (k, o) => this.set(k, o),
    );
  }

  /** The nodes a workload's replica slots are placed on, in placement order (empty: not placed). */
  nodesOf(kind: string, workspace: string, name: string): readonly string[] {
    return this.byKey.get(servingKey(kind, workspace, name))?.nodes ?? [];
  }

  /** Replica slots placed on `node`, every workload's. */
  slotsOn = (node: string): number => this.slots.get(node) ?? 0;

  /** Every agent, function and application not deleted, placed or not, as last seen. */
  *objects(): IterableIterator<StoredObject> {
    for (const e of this.byKey.values()) yield e.o;
  }

  close(): void {
    this.unwatch?.();
  }

  private set(k: string, o: StoredObject | undefined) {
    const prev = this.byKey.get(k);
    for (const n of prev?.nodes ?? []) this.slots.set(n, (this.slots.get(n) ?? 1) - 1);
    this.byKey.delete(k);
    if (!o || o.body.status === 'TERMINATED') return;
    const nodes: string[] = Array.isArray(o.body.replicaNodes) ? o.body.replicaNodes : [];
    this.byKey.set(k, { nodes, o });
    for (const n of nodes) this.slots.set(n, (this.slots.get(n) ?? 0) + 1);
  }
}

/** A node replicas may be placed on: healthy, undrained, of the workload's region. */
export interface ReplicaCandidate {
  id: string;
  cores: number;
  /** Sandboxes placed on it (the sandboxes' index). */
  sandboxes: number;
  /** It has the workload's app built already (it serves the workload, or leads the controllers, which built it). */
  built: boolean;
}

/**
 * The nodes of a workload's `want` slots: those of `current` still usable kept (in order, the extra ones dropped from
 * the end), then each missing slot on the candidate holding the fewest slots of this workload (spread over nodes
 * first), then having its app built, then the least loaded (replica slots and sandboxes per core). Pure; returns
 * `current` itself when nothing changes.
 */
export function placeSlots(
  current: readonly string[],
  want: number,
  usable: (node: string) => boolean,
  candidates: readonly ReplicaCandidate[],
  slotsOn: (node: string) => number,
): readonly string[] {
  const kept = current.filter(usable).slice(0, want);
  if (kept.length === current.length && kept.length === want) return current;
  const own = new Map<string, number>();
  for (const n of kept) own.set(n, (own.get(n) ?? 0) + 1);
  const added = new Map<string, number>();
  const load = (c: ReplicaCandidate) =>
    (slotsOn(c.id) + (added.get(c.id) ?? 0) + c.sandboxes) / Math.max(1, c.cores);
  while (kept.length < want && candidates.length) {
    let best: ReplicaCandidate | undefined;
    for (const c of candidates) {
      if (!best) {
        best = c;
        continue;
      }
      const a = own.get(c.id) ?? 0;
      const b = own.get(best.id) ?? 0;
      if (a !== b) {
        if (a < b) best = c;
        continue;
      }
      if (c.built !== best.built) {
        if (c.built) best = c;
        continue;
      }
      if (load(c) < load(best)) best = c;
    }
    if (!best) break;
    kept.push(best.id);
    own.set(best.id, (own.get(best.id) ?? 0) + 1);
    added.set(best.id, (added.get(best.id) ?? 0) + 1);
  }
  return kept;
}
