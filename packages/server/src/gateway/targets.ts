// What the gateway forwards to (a Target: a sandbox, or a replica of an agent or function) and its table of
// sandboxes: one entry per live sandbox, found by `<ws>/<name>` with one Map lookup on the hot path. Entries come
// from the store (status) and the runtime (live, frozen); the store watch keeps their status current and drops them
// when the sandbox goes away. Replicas' targets are made by workloads.ts with the same `connectionTo`.
import { Pool } from 'undici';
import type { Logger } from 'pino';
import { ApiError } from '../errors.js';
import { isGone } from '../kinds/status.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import { keyOf, type ResourceKey, type Store, type StoredObject, EVERY_WORKSPACE } from '../store/store.js';
import { sandboxId } from '../runtime/sandbox-id.js';

/** Upstream connections per sandbox: concurrent requests beyond this wait in the pool, not in the sandbox. */
export const POOL_CONNECTIONS = 64;
/** Idle upstream connections close after this; below the daemon's own 65 s so the gateway always closes first. */
export const POOL_KEEP_ALIVE_MS = 30_000;
/** How soon a client may retry when the sandbox is not serving yet (starting, deactivated). */
const RETRY_AFTER_S = '1';

/** How the gateway reaches a sandbox: fixed for the life of the entry (a restarted sandbox is a new entry). */
export interface Connection {
  /** Keep-alive pool to the daemon's unix socket. */
  readonly pool: Pool;
  /** Host path of the daemon's unix socket (tunnels connect to it directly). */
  readonly socketPath: string;
  /** The sandbox's private address: its ports are reached there (ports.ts). */
  readonly address: string;
  /** Keep-alive pools to the sandbox's ports, made on first use (ports.ts) and closed with the entry. */
  readonly ports: Map<number, Pool>;
}

/**
 * What the runtime and the store said when the entry was made. The live run state starts from it and is
 * owned by the activator from then on; the usage writer starts its "already written" figures from it.
 */
export interface LoadedState {
  readonly frozen: boolean;
  readonly lastUsedMs: number;
  /** The run state the store holds (RUNNING, STANDBY or none yet). */
  readonly storedState?: string;
}

/**
 * One live instance the gateway forwards to: a sandbox of the table, whose `status` follows the store watch and
 * whose `evicted` is set once it leaves the table, or a replica (workloads.ts), DEPLOYED while it lives, evicted once
 * removed. Run state (frozen, in flight, last use) is the activator's (activator.ts).
 */
export interface Target {
  /** The object it serves: a Sandbox, or the Agent or Function a replica runs. */
  readonly key: ResourceKey;
  /** Its runtime instance. */
  readonly id: string;
  readonly conn: Connection;
  readonly loaded: LoadedState;
  /** The store status; only DEPLOYED takes the fast path and may go to standby. */
  readonly status: string;
  /** Dropped (deleted, deactivated, gone from the runtime, scaled in): nothing may freeze it any more. */
  readonly evicted: boolean;
  /** Its run state and last use are written to its object (a sandbox's `state`, `lastUsedAt`; a replica's are not). */
  readonly recordsUsage: boolean;
}

/** The pools to an instance's daemon socket and, on first use, its ports (ports.ts). */
export function connectionTo(
  info: { socketPath: string; address: string },
  connections = POOL_CONNECTIONS,
): Connection {
  return {
    socketPath: info.socketPath,
    address: info.address,
    ports: new Map(),
    pool: new Pool('http://sandbox', {
      socketPath: info.socketPath,
      connections,
      keepAliveTimeout: POOL_KEEP_ALIVE_MS,
      keepAliveMaxTimeout: POOL_KEEP_ALIVE_MS,
      // A synchronous exec answers when its command ends and a log stream lasts as long as its process:
      // the gateway imposes no time limit of its own, the client decides how long to wait.
      headersTimeout: 0,
      bodyTimeout: 0,
    }),
  };
}

/** Closes a dropped target's pools (requests under way end first). */
export function closeConnection(conn: Connection, logger: Logger, id: string): void {
  for (const p of [conn.pool, ...conn.ports.values()])
    p.close().catch((err) => logger.debug({ err, instance: id }, 'closing a pool failed'));
}

/** The table's own writable view of an entry. */
type Entry = { -readonly [K in 'status' | 'evicted']: Target[K] } & Omit<Target, 'status' | 'evicted'>;

export interface TargetsDeps {
  store: Store;
  driver: RuntimeDriver;
  logger: Logger;
  /** The clock a never-used sandbox's last use starts from. */
  now?: () => number;
  /** Whether this node runs the sandbox (in a cluster, the one it is placed on); default every one. */
  runsHere?: (o: StoredObject) => boolean;
  /**
   * In a cluster, whether this node holds its lease (decision 064): without it, it serves none of its sandboxes. Asked
   * at each request: a node that stalled reads the requests that waited for it before it hears from the database.
   */
  holding?: () => boolean;
}

const nameKey = (workspace: string, name: string) => `${workspace}/${name}`;
/** DEPLOYING with a live runtime is a spec update being applied: the sandbox keeps serving meanwhile. */
const serving = (status: string) => status === 'DEPLOYED' || status === 'DEPLOYING';

const notFound = (workspace: string, name: string) =>
  new ApiError('NOT_FOUND', `sandbox ${JSON.stringify(name)} not found in workspace ${workspace}`);

function notServing(o: StoredObject): ApiError {
  const name = JSON.stringify(o.name);
  const status = o.body.status as string;
  if (isGone(status)) return new ApiError('NOT_FOUND', `sandbox ${name} is being deleted`);
  // Archived (decision 053): not woken by a request, which would undo the archive for any caller (a crawler on a
  // preview); the answer says how to bring it back.
  if (status === 'ARCHIVED' || status === 'ARCHIVING')
    return new ApiError(
      'INVALID_STATE',
      `sandbox ${name} is ${status.toLowerCase()}: POST /v0/sandboxes/${o.name}/unarchive starts it again on its files`,
    );
  const why =
    status === 'FAILED'
      ? `failed: ${(o.body.events ?? []).at(-1)?.message ?? 'see its events'}`
      : status === 'DEACTIVATED' || status === 'DEACTIVATING'
        ? 'deactivated (spec.enabled is false)'
        : status === 'DEPLOYING' || status === 'UNARCHIVING'
          ? 'starting'
          : 'not running';
  return new ApiError('UNAVAILABLE', `sandbox ${name} is ${why}`, {
    headers: { 'retry-after': RETRY_AFTER_S },
  });
}

export class Targets {
  private readonly byName = new Map<string, Entry>();
  private readonly loading = new Map<string, Promise<Entry | undefined>>();
  private unwatch?: () => void;

  constructor(private readonly deps: TargetsDeps) {}

  /** Follows the store, and loads every deployed sandbox so idle ones go to standby even if never called. */
  async start(): Promise<void> {
    this.unwatch = this.deps.store.watch((c) => {
      if (c.object.kind !== 'Sandbox') return;
      const k = nameKey(c.object.workspace, c.object.name);
      const t = this.byName.get(k);
      const status = c.object.body.status;
      if (c.type === 'DELETED' || !serving(status)) {
        if (t) this.evict(k, t);
      } else if (t && status !== t.status && (status === 'DEPLOYING' || t.status === 'DEPLOYING')) {
        // Started again (a daemon that died, a spec update): the instance may be a new one at another address, and
        // the old address may already be another sandbox's. The entry is made again from what the runtime runs now.
        this.evict(k, t);
        if (status === 'DEPLOYED')
          this.load(c.object).catch((err) =>
            this.deps.logger.warn({ err, sandbox: c.object.name }, 'loading a sandbox failed'),
          );
      } else if (t) t.status = status;
      else if (status === 'DEPLOYED')
        this.load(c.object).catch((err) =>
          this.deps.logger.warn({ err, sandbox: c.object.name }, 'loading a sandbox failed'),
        );
    });
    for (const o of await this.deps.store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' }))
      if (o.body.status === 'DEPLOYED') await this.load(o);
  }

  /** The hot path: one Map lookup. */
  get(workspace: string, name: string): Target | undefined {
    if (this.deps.holding && !this.deps.holding()) return undefined;
    return this.byName.get(nameKey(workspace, name));
  }

  values(): IterableIterator<Target> {
    return this.byName.values();
  }

  /** The slow path: the store says whether it should serve, the runtime whether it runs. Throws 404/503. */
  async resolve(workspace: string, name: string): Promise<Target> {
    const key: ResourceKey = { kind: 'Sandbox', workspace, parent: '', name };
    const o = await this.deps.store.get(key);
    if (!o) throw notFound(workspace, name);
    const status = o.body.status;
    if (!serving(status)) throw notServing(o);
    const held = !this.deps.holding || this.deps.holding();
    const t = (held ? this.byName.get(nameKey(workspace, name)) : undefined) ?? (await this.load(o));
    if (!t) throw notServing(o);
    t.status = status;
    return t;
  }

  /**
   * Why a sandbox whose daemon could not be reached does not serve, as the store says now (FAILED, being deleted…),
   * or undefined while it should: the store shows a status before its watchers (this table) hear of it, so a caller
   * that read FAILED and calls at once gets the 503 naming it rather than the dead daemon's 502.
   */
  async whyDown(workspace: string, name: string): Promise<ApiError | undefined> {
    const o = await this.deps.store.get({ kind: 'Sandbox', workspace, parent: '', name });
    if (!o) return notFound(workspace, name);
    return serving(o.body.status) ? undefined : notServing(o);
  }

  private load(o: StoredObject): Promise<Entry | undefined> {
    const k = nameKey(o.workspace, o.name);
    let p = this.loading.get(k);
    if (!p) {
      p = this.create(o).finally(() => this.loading.delete(k));
      this.loading.set(k, p);
    }
    return p;
  }

  private async create(o: StoredObject): Promise<Entry | undefined> {
    const id = sandboxId(o.workspace, o.name);
    const info = await this.deps.driver.inspect(id);
    if (!info || info.state === 'dead') return undefined;
    // The object may have changed while the runtime was asked (a DELETE whose watch event has passed).
    const now = await this.deps.store.get(keyOf(o));
    if (!now || !serving(now.body.status)) return undefined;
    // An instance left here by a node the sandbox was placed away from is not served (its reconcile removes it).
    if (this.deps.runsHere && !this.deps.runsHere(now)) return undefined;
    const k = nameKey(o.workspace, o.name);
    const existing = this.byName.get(k);
    if (existing) return existing;
    const used =
      Date.parse(o.body.lastUsedAt ?? '') ||
      Date.parse(o.body.metadata?.createdAt ?? '') ||
      (this.deps.now ?? Date.now)();
    const t: Entry = {
      key: { kind: 'Sandbox', workspace: o.workspace, parent: '', name: o.name },
      id,
      conn: connectionTo(info),
      loaded: { frozen: info.state === 'frozen', lastUsedMs: used, storedState: o.body.state },
      status: now.body.status,
      evicted: false,
      recordsUsage: true,
    };
    this.byName.set(k, t);
    return t;
  }

  /**
   * Drops every sandbox from the table: this node no longer holds them (its lease lapsed, decision 064). A request
   * loads one again only once `runsHere` says so.
   */
  evictAll(): void {
    for (const [k, t] of this.byName) this.evict(k, t);
  }

  private evict(k: string, t: Entry) {
    this.byName.delete(k);
    t.evicted = true;
    closeConnection(t.conn, this.deps.logger, t.id);
  }

  async close(): Promise<void> {
    this.unwatch?.();
    await Promise.allSettled([...this.loading.values()]);
    const pools = [...this.byName.values()].flatMap((t) =>
      [t.conn.pool, ...t.conn.ports.values()].map((p) => p.destroy()),
    );
    this.byName.clear();
    await Promise.allSettled(pools);
  }
}

/** The table entry of a sandbox that should serve; the store is asked only off the fast path. Throws 404/503. */
export async function sandboxTargetOf(targets: Targets, workspace: string, name: string): Promise<Target> {
  const t = targets.get(workspace, name);
  return t?.status === 'DEPLOYED' ? t : targets.resolve(workspace, name);
}
