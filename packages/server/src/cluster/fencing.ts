// Fenced writes of a cluster's nodes (docs/decisions/064-cluster-fencing.md). What a node writes as the holder of a
// sandbox (its status, run state, events, the record's deletion) carries the store's `fence` op: the write lands only
// while the database still places that sandbox on this node and this node still holds its lease at this process's
// epoch. A node that stalled past its lease (a long pause, a cut to the database that healed) can then no longer
// overwrite what the sandbox's new node wrote, whatever it had in flight. What the leader of the controllers writes
// carries the same op on its lock (docs/decisions/068-leader-fence.md): it lands only while the leader's own session
// still holds the role's advisory lock, so a leader cut from that session writes nothing beside the next one.
import type { Resources } from '../store/resources.js';
import type { LeaderFence } from './leadership.js';
import {
  FencedError,
  firstKey,
  keyString,
  type ResourceKey,
  type Store,
  type WriteOp,
} from '../store/store.js';

export interface Fence {
  node: string;
  epoch: number;
}

export interface HolderLease {
  /** This node's fence while it holds its lease; undefined while it does not (lapsed, registering again, superseded). */
  fence(): Fence | undefined;
  /** The database refused a fenced write for the lease: the node looks at its lease now rather than at its next beat. */
  refused(): void;
}

/**
 * `store` as a holder writes through it: every write touching an object `held` says a holder writes (a sandbox) is
 * fenced on each such object, in the same transaction. Reads, watches and other writes pass through. A write made
 * while the node holds no lease is refused here, without asking the database.
 */
export function fencedStore(store: Store, lease: HolderLease, held: (key: ResourceKey) => boolean): Store {
  return withWrite(store, async (ops) => {
    const keys = new Map<string, ResourceKey>();
    for (const op of ops)
      if (op.op !== 'check' && op.op !== 'fence' && held(op.key)) keys.set(keyString(op.key), op.key);
    if (!keys.size) return store.write(ops);
    const f = lease.fence();
    const first = keys.values().next().value as ResourceKey;
    if (!f) throw new FencedError(first, 'lease');
    const fences: WriteOp[] = [...keys.values()].map((key) => ({ op: 'fence', key, ...f }));
    try {
      return await store.write([...fences, ...ops]);
    } catch (err) {
      if (err instanceof FencedError && err.lost === 'lease') lease.refused();
      throw err;
    }
  });
}

export interface LeaderLease {
  /** The lead's fence while this server leads; undefined while it does not (a follower, or the lead lost). */
  fence(): LeaderFence | undefined;
  /** The database refused a write for the lead: it is lost, and what the leader runs stops now. */
  refused(err: FencedError): void;
}

/**
 * `store` as what the leader runs writes through it: every write is fenced on the lead's lock, in the same
 * transaction. A write made while this server does not lead is refused here, without asking the database.
 */
export function leaderFencedStore(store: Store, lead: LeaderLease): Store {
  return withWrite(store, async (ops) => {
    const f = lead.fence();
    if (!f) throw new FencedError(firstKey(ops), 'lead');
    try {
      return await store.write([{ op: 'fence', ...f }, ...ops]);
    } catch (err) {
      if (err instanceof FencedError && err.lost === 'lead') lead.refused(err);
      throw err;
    }
  });
}

/** `store` with its writes made by `write`; reads, watches and close pass through. */
function withWrite(store: Store, write: Store['write']): Store {
  return {
    get: (key) => store.get(key),
    list: (q) => store.list(q),
    watch: (fn) => store.watch(fn),
    close: () => store.close(),
    write,
  };
}

/**
 * An event a holder records about what it holds (a sandbox, or an agent's or function's replicas placed on it: decision
 * 092) through its fenced resources; false when the store fenced it off (decision 064): held elsewhere now, or this
 * node's lease lapsed.
 */
export async function recordHeld(resources: Resources, key: ResourceKey, message: string): Promise<boolean> {
  try {
    await resources.recordEvent(key, message);
    return true;
  } catch (err) {
    if (err instanceof FencedError) return false;
    throw err;
  }
}
