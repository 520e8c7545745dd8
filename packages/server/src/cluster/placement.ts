// Where a cluster's sandboxes run (docs/decisions/059-cluster-placement.md). Each sandbox records the node it is
// placed on (its read-only `node` field), set once when it is created and changed only when that node dies or is
// drained. Every server keeps the same in-memory index of those fields from the change feed, so deciding where a new
// sandbox goes, and which server a request for a sandbox belongs to, costs a request no database round trip.
import { isDefaultImage } from '../kinds/image-reference.js';
import { followKinds } from '../store/follow-kinds.js';
import type { Store, StoredObject } from '../store/store.js';

/** A node a sandbox may be placed on: healthy and not drained. */
export interface Candidate {
  id: string;
  cores: number;
  memoryMb: number;
}

/** The key of the default image's warm pool in a node's `warm` report (other images: `sha256:<id prefix>`). */
export const DEFAULT_WARM_KEY = 'default';

/** The nodes a sandbox of one region may go to, and among them those holding a warm sandbox of each image. */
export interface RegionPool {
  all: Candidate[];
  /** Image key (DEFAULT_WARM_KEY, …) → the candidates whose last heartbeat reported a warm sandbox of it. */
  warm: Map<string, Candidate[]>;
}

/** No node of the sandbox's region can take it now: the create is refused, never placed in another region. */
export class NoNodeError extends Error {
  override name = 'NoNodeError';
  constructor(
    readonly region: string | undefined,
    why: string,
  ) {
    super(
      `no node ${region === undefined ? '' : `of region ${JSON.stringify(region)} `}can take this sandbox now: ${why}`,
    );
  }
}

export interface Load {
  /** Sandboxes placed on the node. */
  sandboxes: number;
  /** The memory they ask for (spec.runtime.memory), MB. */
  memoryMb: number;
}

const NO_LOAD: Load = { sandboxes: 0, memoryMb: 0 };

/** The busier of a node's two resources, as a share of what it has: sandboxes per core, memory asked per memory. */
export const loadScore = (c: Candidate, l: Load) =>
  Math.max(l.sandboxes / Math.max(1, c.cores), l.memoryMb / Math.max(1, c.memoryMb));

/**
 * Best of K (the power of K choices): K candidates drawn at random, the least loaded wins. Against least-loaded over
 * every node, it costs K lookups whatever the cluster's size, and servers placing at once with the same slightly
 * stale view do not all pick the same node.
 */
export function bestOf(
  candidates: readonly Candidate[],
  load: (id: string) => Load,
  k = 2,
  random: () => number = Math.random,
): string | undefined {
  return bestCandidate(candidates, load, k, random)?.id;
}

function bestCandidate(
  candidates: readonly Candidate[],
  load: (id: string) => Load,
  k: number,
  random: () => number,
): Candidate | undefined {
  const n = candidates.length;
  if (n === 0) return undefined;
  if (n === 1) return candidates[0];
  let best: Candidate | undefined;
  let bestScore = Number.POSITIVE_INFINITY;
  for (let i = 0; i < Math.min(k, n); i++) {
    const c = candidates[Math.floor(random() * n)];
    const s = loadScore(c, load(c.id));
    if (s < bestScore) {
      best = c;
      bestScore = s;
    }
  }
  return best;
}

/**
 * The least loaded of every candidate (ties drawn at random): for what one placer decides alone with fresh counts (the
 * controllers' leader placing job tasks, decision 093), where best of K's guard against placers herding onto the same
 * stale pick is not needed and drawing the same busy node twice would be a worse pick for nothing.
 */
export function leastLoaded(
  candidates: readonly Candidate[],
  load: (id: string) => Load,
  random: () => number = Math.random,
): string | undefined {
  let best: Candidate | undefined;
  let bestScore = Number.POSITIVE_INFINITY;
  let ties = 0;
  for (const c of candidates) {
    const s = loadScore(c, load(c.id));
    if (s < bestScore) {
      best = c;
      bestScore = s;
      ties = 1;
    } else if (s === bestScore && random() * ++ties < 1) best = c;
  }
  return best?.id;
}

/** Whether node `c` has room for `memoryMb` more: what its sandboxes ask for stays within its memory. */
const hasRoom = (c: Candidate, l: Load, memoryMb: number) => l.memoryMb + memoryMb <= c.memoryMb;

/**
 * What a warm sandbox is worth against load (a load score is sandboxes per core or memory asked per memory, whichever
 * is busier): a warm node is taken over a colder pick up to this much busier. A create there is an assignment (a few
 * ms) instead of a start (~100 ms); the bonus is bounded so that warm nodes do not draw every create of a burst (their
 * report is up to a heartbeat old) nor take the load of the region on their own.
 */
export const WARM_BONUS = 0.25;

/**
 * The node of `pool` a new sandbox on image `image` goes to: best of K among every node of the pool, and best of K
 * among those holding a warm sandbox of that image; the warm one wins unless it is busier than the other by more than
 * WARM_BONUS, or has no room for the sandbox. Undefined when the pool has no node.
 */
export function choose(
  pool: RegionPool,
  image: string,
  memoryMb: number,
  load: (id: string) => Load,
  k = 2,
  random: () => number = Math.random,
): string | undefined {
  const any = bestCandidate(pool.all, load, k, random);
  const warm = pool.warm.get(image);
  const w = warm?.length ? bestCandidate(warm, load, k, random) : undefined;
  if (!w) return any?.id;
  const wl = load(w.id);
  if (!hasRoom(w, wl, memoryMb)) return any?.id;
  if (!any || loadScore(w, wl) - WARM_BONUS <= loadScore(any, load(any.id))) return w.id;
  return any.id;
}

/**
 * The pools placement draws from, by region, made from the node list at each read (not at each decision): a node
 * serving several regions is in each one's pool. `warmOf` gives the node's warm report (image key → ready count).
 */
export function regionPools<N extends Candidate>(
  nodes: readonly N[],
  regionsOf: (n: N) => readonly string[],
  warmOf: (n: N) => Readonly<Record<string, number>>,
): Map<string, RegionPool> {
  const out = new Map<string, RegionPool>();
  for (const n of nodes)
    for (const r of regionsOf(n)) {
      let pool = out.get(r);
      if (!pool) {
        pool = { all: [], warm: new Map() };
        out.set(r, pool);
      }
      pool.all.push(n);
      for (const [image, ready] of Object.entries(warmOf(n))) {
        if (!(ready > 0)) continue;
        const list = pool.warm.get(image) ?? [];
        list.push(n);
        pool.warm.set(image, list);
      }
    }
  return out;
}

/** A sandbox's body as the placement reads it (before it is stored). */
export interface PlacedBody {
  rootLayers?: unknown[];
  spec?: {
    region?: unknown;
    volumes?: unknown[];
    runtime?: { image?: unknown; [field: string]: unknown };
    [field: string]: unknown;
  };
}

/**
 * The volumes a new sandbox mounts: it is not drawn but runs where their data is, the node that made them (decision
 * 102), or the controllers' leader, which makes a volume not made yet. A sandbox on an image is drawn like any other:
 * its node gets the image from the leader before it starts (docs/decisions/081-images-across-nodes.md).
 */
export function volumeNamesOf(body: PlacedBody): string[] {
  const names = (body.spec?.volumes ?? []).map((v) => (v as { name?: unknown })?.name);
  return [...new Set(names.filter((n): n is string => typeof n === 'string'))];
}

/**
 * The warm pool key placement prefers for a sandbox: the default image's. Another image's pools are keyed by its id,
 * which a name is resolved to only on the node that starts it: no preference (an empty key matches no pool).
 */
export function warmKeyOf(body: PlacedBody): string {
  const image = body.spec?.runtime?.image;
  return isDefaultImage(typeof image === 'string' ? image : undefined) ? DEFAULT_WARM_KEY : '';
}

/**
 * Whether node `self` runs a sandbox: on SQLite (`self` undefined) it runs every one; in a cluster, those placed on
 * it (one not placed yet runs nowhere until the controllers' leader places it).
 */
export const runsHere = (self: string | undefined, o: StoredObject): boolean =>
  self === undefined || o.body.node === self;

const nameKey = (workspace: string, name: string) => `${workspace}/${name}`;
const memoryOf = (o: StoredObject) => Number(o.body.spec?.runtime?.memory) || 0;

/** Every sandbox's node and each node's load, kept from the store's change feed. */
export class SandboxPlacements {
  private readonly byName = new Map<string, { node: string; memoryMb: number }>();
  private readonly loads = new Map<string, Load>();
  private unwatch?: () => void;

  constructor(private readonly store: Store) {}

  async start(): Promise<void> {
    this.unwatch = await followKinds(
      this.store,
      ['Sandbox'],
      (o) => nameKey(o.workspace, o.name),
      (k, o) => this.set(k, o),
    );
  }

  /** The node a sandbox is placed on; undefined when it has none (not placed yet, or not in a cluster). */
  nodeOf(workspace: string, name: string): string | undefined {
    return this.byName.get(nameKey(workspace, name))?.node || undefined;
  }

  load = (node: string): Load => this.loads.get(node) ?? NO_LOAD;

  /** Every sandbox not TERMINATED, with its node ('' when not placed yet). */
  *placed(): IterableIterator<[workspace: string, name: string, node: string]> {
    for (const [k, v] of this.byName) {
      const i = k.indexOf('/');
      yield [k.slice(0, i), k.slice(i + 1), v.node];
    }
  }

  close(): void {
    this.unwatch?.();
  }

  private set(k: string, o: StoredObject | undefined) {
    const prev = this.byName.get(k);
    if (prev?.node) {
      const l = this.load(prev.node);
      this.loads.set(prev.node, { sandboxes: l.sandboxes - 1, memoryMb: l.memoryMb - prev.memoryMb });
    }
    this.byName.delete(k);
    // A TERMINATED sandbox's record may stay a while (its retention): it holds nothing.
    if (!o || o.body.status === 'TERMINATED') return;
    // '': not placed yet (created before placement existed); the controllers' leader places it.
    const node = typeof o.body.node === 'string' ? o.body.node : '';
    const v = { node, memoryMb: memoryOf(o) };
    this.byName.set(k, v);
    if (!node) return;
    const l = this.load(node);
    this.loads.set(node, { sandboxes: l.sandboxes + 1, memoryMb: l.memoryMb + v.memoryMb });
  }
}
