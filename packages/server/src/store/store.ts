// The one generic resource store. Nothing here names a kind: a kind is only a string key.
// Backends (sqlite.ts, later postgres.ts) implement this interface; every write is one transaction.

export interface ResourceKey {
  kind: string;
  workspace: string;
  /** Names of the parent objects joined by `/` (e.g. `myvpc/gw1`), `''` for top-level objects. */
  parent: string;
  name: string;
}

export interface StoredObject extends ResourceKey {
  /** Bumped by every write; a write that names an older one fails with `conflict`. */
  resourceVersion: number;
  body: Record<string, any>;
}

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  seq: number;
  type: ChangeType;
  object: StoredObject;
}

/**
 * Names a list across every workspace. Only the server's own sweeps (controllers, start-up, the gateway's address
 * table) ask for it, each saying so at the call: a request always lists in the one workspace it acts in, and a list
 * that names neither does not compile (and fails in the store when reached from untyped code).
 */
export const EVERY_WORKSPACE: unique symbol = Symbol('every workspace');

export interface ListQuery {
  kind: string;
  /** The one workspace listed, or EVERY_WORKSPACE. */
  workspace: string | typeof EVERY_WORKSPACE;
  parent?: string;
  limit?: number;
  /** Return names strictly after this one (the decoded list cursor). */
  after?: string;
  labels?: Record<string, string>;
  /**
   * The caller only reads the objects and changes none of them (nor hands them to code that may): a backend may
   * answer with the bodies it keeps rather than copies (a page of kept GET texts reads only keys and versions).
   */
  readOnly?: boolean;
}

export type WriteOp =
  | { op: 'create'; key: ResourceKey; body: Record<string, any> }
  | { op: 'update'; key: ResourceKey; body: Record<string, any>; expectVersion?: number }
  /** Read-modify-write inside the transaction: `mutate` gets the current object and returns its new body. */
  | {
      op: 'update';
      key: ResourceKey;
      mutate: (cur: StoredObject) => Record<string, any>;
      expectVersion?: number;
    }
  | { op: 'delete'; key: ResourceKey; expectVersion?: number }
  /**
   * A rule over other objects that must hold once the ops before it are applied (a workspace's quota), judged inside
   * the transaction: `judge` gets what `list` finds at that point and throws to refuse the whole write. The backend
   * serialises it with every write that could change that list (SQLite has one writer; a shared backend takes a
   * lock per listed kind and workspace first), so two writes judged at once can never both pass.
   */
  /**
   * Judges the objects `list` finds (throwing refuses the whole write). `reads`: statements a cluster's module gives
   * (a lock, a read of its own table), run first inside the transaction on PostgreSQL, their rows passed to `judge`;
   * SQLite has no other server to agree with and runs none (`judge` gets no rows).
   */
  | {
      op: 'check';
      list: ListQuery;
      reads?: { text: string; values: unknown[] }[];
      judge: (objects: StoredObject[], rows?: Record<string, unknown>[][]) => void;
    }
  /**
   * The holder's fence (docs/decisions/064-cluster-fencing.md): the write applies only while the object at `key` is
   * placed on node `node` (its body's `node`, or one of its `replicaNodes`) and that node still holds its lease at `epoch`, not lapsed by the
   * backend's clock; otherwise the whole write is refused with `FencedError`. Judged inside the transaction, under
   * the same serialisation as every write, so a read-then-write race cannot pass it. A backend with one server and
   * no leases (SQLite) has nothing to fence: the op always holds there.
   */
  | { op: 'fence'; key: ResourceKey; node: string; epoch: number }
  /**
   * The leader's fence (docs/decisions/068-leader-fence.md), the same rule for the server leading a cluster's
   * controllers: the write applies only while the advisory lock `lock` (its 64-bit key, in decimal) is granted to
   * the database session whose backend pid is `pid` (the session the leader took it on) and that session also holds
   * its mark, the two-key advisory lock (`LEADER_MARK`, `mark`) it took with the lead: a later session given the same
   * pid does not hold it (docs/decisions/080-leader-session-mark.md). Otherwise the whole write is refused with
   * `FencedError` (`lead`). Judged inside the transaction like the holder's. Always holds on SQLite.
   */
  | { op: 'fence'; lock: string; pid: number; mark: number };

/**
 * The first key of a leader's session mark (`pg_advisory_lock(LEADER_MARK, mark)`, shown in `pg_locks` as `classid`
 * with `objsubid` 2): "bert". Berth takes no other two-key advisory lock, so a mark never meets another lock.
 */
export const LEADER_MARK = 0x62657274;

export type StoreErrorReason = 'exists' | 'not_found' | 'conflict';

export class StoreError extends Error {
  constructor(
    readonly reason: StoreErrorReason,
    readonly key: ResourceKey,
  ) {
    super(`${reason}: ${key.kind} ${key.workspace}/${key.parent ? `${key.parent}/` : ''}${key.name}`);
  }
}

const FENCED_BECAUSE = {
  placement: 'is placed on another node',
  lease: "is not this node's to write: its lease is gone",
  lead: 'is not written: this server no longer leads (its lock session is gone)',
};

/**
 * A write refused by its `fence` op: the object is placed on another node now (`placement`), the writer's lease is
 * gone (`lease`: a stale epoch, or lapsed), or the writer no longer leads (`lead`: its lock session ended; `key` is
 * then the first object the write names). Not a failure to retry: the writer no longer holds the object.
 */
export class FencedError extends Error {
  constructor(
    readonly key: ResourceKey,
    readonly lost: 'placement' | 'lease' | 'lead',
  ) {
    super(`fenced: ${key.kind} ${key.workspace}/${key.name} ${FENCED_BECAUSE[lost]}`);
  }
}

/**
 * The database could not be reached (refused, reset, shutting down, out of connections): nothing of the call was
 * applied, and the same call may succeed in a moment. The API answers it with 503 and `Retry-After`, not a 500.
 */
export class StoreUnavailableError extends Error {
  constructor(readonly cause: unknown) {
    super(`the database is not reachable: ${(cause as Error)?.message ?? cause}`);
  }
}

export interface Store {
  get(key: ResourceKey): Promise<StoredObject | undefined>;
  /**
   * The version of the object as last committed, when this process knows it without a read (SQLite's row cache);
   * undefined when it does not (not cached, deleted, or a driver that keeps no such cache): then `get` decides.
   */
  versionOf?(key: ResourceKey): number | undefined;
  /**
   * A number that changes with every committed write (create, replace, status, delete) of an object of `kind` under
   * `workspace` and `parent`, when this process sees every such write (SQLite: one process owns the database): a
   * list of those objects made at one number is the same list while the number stays. Absent on a driver that
   * cannot tell (PostgreSQL: other servers write).
   */
  listVersion?(group: { kind: string; workspace: string; parent: string }): number;
  list(q: ListQuery): Promise<StoredObject[]>;
  /** Applies every op or none; returns the written objects (deleted ones as they were; checks add none). */
  write(ops: WriteOp[]): Promise<StoredObject[]>;
  /** Called after each committed change, in commit order. Returns an unsubscribe function. */
  watch(fn: (c: Change) => void): () => void;
  close(): Promise<void>;
}

/** An object as both SQL backends keep it: the key's columns, the version as `rv`, the body as JSON text. */
export interface Row {
  kind: string;
  workspace: string;
  parent: string;
  name: string;
  rv: number;
  body: string;
}

export const toObject = (r: Row): StoredObject => ({
  kind: r.kind,
  workspace: r.workspace,
  parent: r.parent,
  name: r.name,
  resourceVersion: r.rv,
  body: JSON.parse(r.body),
});

export const keyOf = (o: ResourceKey): ResourceKey => ({
  kind: o.kind,
  workspace: o.workspace,
  parent: o.parent,
  name: o.name,
});

/** The first object a write names: what a refused leader's write is reported by (its fence names none). */
export function firstKey(ops: WriteOp[]): ResourceKey {
  for (const op of ops) if ('key' in op) return op.key;
  return { kind: 'write', workspace: '', parent: '', name: '' };
}

export const keyString = (k: ResourceKey) => `${groupKeyString(k)}\u0000${k.name}`;

/** The objects of one kind under one workspace and parent, as a string: keyString's head (list versions, lists). */
export const groupKeyString = (g: { kind: string; workspace: string; parent: string }) =>
  `${g.kind}\u0000${g.workspace}\u0000${g.parent}`;

/** Convenience wrappers over `write` for the single-object case. */
export async function create(store: Store, key: ResourceKey, body: Record<string, any>) {
  return (await store.write([{ op: 'create', key, body }]))[0];
}
export async function update(
  store: Store,
  key: ResourceKey,
  body: Record<string, any>,
  expectVersion?: number,
) {
  return (await store.write([{ op: 'update', key, body, expectVersion }]))[0];
}
export async function remove(store: Store, key: ResourceKey, expectVersion?: number) {
  return (await store.write([{ op: 'delete', key, expectVersion }]))[0];
}
