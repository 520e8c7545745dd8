// The servers of a cluster (docs/decisions/056-cluster-postgres.md): each registers itself in the shared database with
// what it offers (peer address, region, cores, memory) and what it holds (instances, the roles it leads), and keeps a
// lease by a heartbeat. A node whose lease lapsed is reported unhealthy. Times are the database's (`now()`), so the
// servers' clocks need not agree. On SQLite there is one server, and the list is this one.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { keepClientErrors } from '../store/postgres.js';
import { leaderHeld } from '../store/postgres-lead.js';
import type { Fence, HolderLease } from './fencing.js';
import type { LeaderFence, LeadSession } from './leadership.js';

export interface NodeSelf {
  id: string;
  /** Where the other servers reach this one (its peer address). */
  address: string;
  /** Its first region (BERTH_REGIONS' first). */
  region: string;
  /** Every region it serves (BERTH_REGIONS): a sandbox asking for one of them may be placed on it. */
  regions?: string[];
  cores: number;
  memoryMb: number;
  /**
   * The workspace quotas it judges with (its BERTH_QUOTA_* settings): every server of a cluster should have the same,
   * and each one reports the nodes whose differ (main/nodes.ts).
   */
  quotas?: Record<string, number>;
}

export interface NodeView extends NodeSelf {
  regions: string[];
  /** Runtime instances it holds (sandboxes, replicas, tasks, builds), as of its last heartbeat. */
  instances: number;
  /**
   * Sandboxes started ahead and waiting in its warm pools, by image (`default`, or `sha256:<id prefix>` of an image of
   * its store), as of its last heartbeat: placement prefers a node with a warm sandbox of the create's image.
   */
  warm: Record<string, number>;
  /** The roles it leads (leadership.ts), as of its last heartbeat. */
  leads: string[];
  /** Bumped by each start of a server with this id: a server that finds a newer one is not this node any more. */
  epoch: number;
  startedAt: string;
  heartbeatAt: string;
  /** Its lease holds: it heartbeated within its lease and did not stop. */
  healthy: boolean;
  /**
   * It heartbeated within its lease, stopped or not: what is placed on it stays placed there (a server restarted
   * within its lease adopts its sandboxes as they are); once this is false they are placed again elsewhere.
   */
  leased: boolean;
  /** It stopped cleanly (a restart brings it back). */
  stopped: boolean;
  /** An operator drained it (`berth node drain`): it leads no role until undrained. */
  drained: boolean;
  /** Roles it gave up when drained that no server has taken over yet (formerLeaders clears them). */
  handedOver?: string[];
  /**
   * The agents and functions it has a live replica of (`<kind>/<workspace>/<name>`), as of its last heartbeat: a
   * server sends their requests to a node serving them (docs/decisions/086-replicas-across-nodes.md).
   */
  serving?: string[];
  /**
   * Its replicas of each workload it serves (`<kind>/<workspace>/<name>` → each replica as GET .../replicas lists it),
   * as of its last heartbeat: any server counts and lists an agent's replicas over every node from it (decision 092).
   * Not shown in `GET /v0/nodes`.
   */
  replicas?: Record<string, PublishedReplica[]>;
}

/** One replica as its node publishes it at each heartbeat (NodeView.replicas). */
export interface PublishedReplica {
  id: string;
  revision: string;
  role: 'active' | 'canary';
  inflight: number;
  lastUsedAt: string;
  standbyUntil?: string;
}

/** What a node still holds, as a drain waits for it to hold nothing (`berth node drain --wait`). */
export interface Holdings {
  /** Sandboxes placed on it (not TERMINATED), from the placement index of the server that answers. */
  sandboxes: number;
  /**
   * Runtime instances it runs (sandboxes, replicas, job tasks, builds), as of its last heartbeat; 0 once its lease
   * lapsed: what a dead or stopped node left is no longer served, and is removed when it starts again.
   */
  instances: number;
  /** Roles it leads, or handed over and not yet taken over by another server. */
  leads: string[];
}

export function holdingsOf(n: NodeView, sandboxes: number): Holdings & { empty: boolean } {
  const leads = [...new Set([...n.leads, ...(n.handedOver ?? [])])];
  const instances = n.leased ? n.instances : 0;
  return { sandboxes, instances, leads, empty: sandboxes === 0 && instances === 0 && leads.length === 0 };
}

export interface Nodes extends HolderLease {
  readonly self: NodeSelf;
  list(): Promise<NodeView[]>;
  /** Heartbeats now (the roles led changed: the other servers learn it without waiting a beat). */
  beat(): Promise<void>;
  /** Drains a node, or undrains it; undefined when no node has that id. */
  drain(id: string, drained: boolean): Promise<NodeView | undefined>;
  /**
   * This node gave up leading `role` (it was drained): its claim becomes a hand-over, which the server that takes
   * the lead reads as it reads a dead leader's claim (formerLeaders), and no server sends requests here for it.
   * Written on the lead's own lock session, so only while this node still leads: once that session ended, the next
   * leader may have read and cleared this node's claim already, and a hand-over written after it would stay.
   */
  handOver(role: string, session: LeadSession): Promise<void>;
  close(): Promise<void>;
}

/** Refused on SQLite: the one server has nowhere to hand its work. */
export class AloneError extends Error {}

export interface NodesOptions {
  self: NodeSelf;
  /** What the heartbeat reports. */
  instances: () => Promise<number>;
  /** The sandboxes waiting in its warm pools, by image (NodeView.warm); none when absent. */
  warm?: () => Record<string, number>;
  leads: () => string[];
  /**
   * The objects whose instances this node runs for the role it leads (agents', functions' and applications'
   * replicas: `[kind, workspace, name]`), written at each beat while it leads; undefined: the column is left as it
   * is (a node that gave the lead up keeps what it reported last, for the next leader to read: takeRan).
   */
  ran?: () => [string, string, string][] | undefined;
  /** The agents and functions it has a live replica of (NodeView.serving), written at each beat. */
  serving?: () => string[];
  /** Its replicas by workload (NodeView.replicas), written at each beat. */
  replicas?: () => Record<string, PublishedReplica[]>;
  /**
   * What each role's claim in `leads` is fenced on (leadership.ts `fence`): a role is written as led only while the
   * database still grants its lock to this server's lock session, so a leader cut from that session does not claim
   * it again after the next leader cleared its claim (decision 080). Without it, `leads` is written as it is.
   */
  leadFence?: (role: string) => LeaderFence | undefined;
  /** A node not heard from for this long is unhealthy (BERTH_NODE_LEASE_S). */
  leaseMs: number;
  warn: (err: unknown, msg: string) => void;
  info?: (msg: string) => void;
  /**
   * Run each time the node has (again) a lease of its own, before it acts as holder under it: re-reads what the
   * database places on it and removes the rest (a rejection fails the attempt; the next beat registers again).
   */
  settle?: () => Promise<void>;
  /** The node holds its lease again and acts as holder: what `settle` kept is taken up (its reconciles woken). */
  held?: () => void;
  /** The node lost its lease: it stops serving its sandboxes' instances at once. */
  lost?: () => void;
}

const SCHEMA_LOCK = 0x62657274_0003n;

/** The nodes table, made (or given the columns of a later version) by whichever server needs it first. */
async function ensureSchema(c: pg.ClientBase) {
  await c.query('BEGIN');
  try {
    await c.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
    await c.query(`CREATE TABLE IF NOT EXISTS nodes (
      id TEXT PRIMARY KEY,
      address TEXT NOT NULL,
      region TEXT NOT NULL,
      cores INTEGER NOT NULL,
      memory_mb BIGINT NOT NULL,
      instances INTEGER NOT NULL,
      leads TEXT NOT NULL,
      epoch BIGINT NOT NULL,
      lease_ms INTEGER NOT NULL,
      started_at TIMESTAMPTZ NOT NULL,
      heartbeat_at TIMESTAMPTZ NOT NULL,
      stopped BOOLEAN NOT NULL
    )`);
    await c.query(`ALTER TABLE nodes ADD COLUMN IF NOT EXISTS drained BOOLEAN NOT NULL DEFAULT false,
      ADD COLUMN IF NOT EXISTS handed_over TEXT NOT NULL DEFAULT ''`);
    // Placement by region and warm pool (decision 077): the regions a node serves, its warm pools at each heartbeat.
    await c.query(`ALTER TABLE nodes ADD COLUMN IF NOT EXISTS regions TEXT NOT NULL DEFAULT '',
      ADD COLUMN IF NOT EXISTS warm TEXT NOT NULL DEFAULT '{}'`);
    // What a leader ran, for the next leader to tell those objects naming it (decision 082).
    await c.query(`ALTER TABLE nodes ADD COLUMN IF NOT EXISTS ran TEXT NOT NULL DEFAULT '[]'`);
    // The replicas each node serves, for the other servers' gateways (decision 086).
    await c.query(`ALTER TABLE nodes ADD COLUMN IF NOT EXISTS serving TEXT NOT NULL DEFAULT ''`);
    await c.query(`ALTER TABLE nodes ADD COLUMN IF NOT EXISTS replicas TEXT NOT NULL DEFAULT '{}'`);
    // The quotas each server judges with, for the others to compare with theirs.
    await c.query(`ALTER TABLE nodes ADD COLUMN IF NOT EXISTS quotas TEXT NOT NULL DEFAULT '{}'`);
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}

/** Whether an operator drained node `id` (false before the node ever registered). Asked on the caller's session. */
export async function isDrained(c: pg.ClientBase, id: string): Promise<boolean> {
  try {
    return (await c.query('SELECT 1 FROM nodes WHERE id = $1 AND drained', [id])).rowCount === 1;
  } catch (err) {
    // The table or its column is not made yet: the first start of a cluster, or of this version on it.
    if (['42P01', '42703'].includes((err as { code?: string }).code ?? '')) return false;
    throw err;
  }
}

/** The node's id: BERTH_NODE_ID, else one made once per data dir (`<host>-<random>`), kept in `<dataDir>/node-id`. */
export function nodeId(dataDir: string, configured?: string): string {
  if (configured) return configured;
  const file = join(dataDir, 'node-id');
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const host = hostname()
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, 40);
  const id = `${host}-${randomBytes(3).toString('hex')}`;
  writeFileSync(file, `${id}\n`, { mode: 0o600, flag: 'wx' });
  return id;
}

/**
 * The nodes other than `self` whose last heartbeat said they led `role`, or that handed it over when drained: read
 * by a server that has just taken the lead, they are the ones that held what it now takes over (a node that stopped
 * cleanly cleared its roles). Their claim is cleared as it is read, so no server sends requests there, and the next
 * takeover does not name them again. Run on the lead's own lock session (leadership.ts `LeadSession`): a server that
 * lost its lead before this ran clears nothing, not even the claim of the server that leads now (decision 080).
 */
export async function formerLeaders(session: LeadSession, role: string, self: string): Promise<string[]> {
  try {
    // One statement, outside any transaction: the session's own checks may run between two of a transaction's.
    const { rows } = await session.query<{ id: string }>(
      `UPDATE nodes SET leads = array_to_string(array_remove(string_to_array(leads, ','), $2), ','),
         handed_over = array_to_string(array_remove(string_to_array(handed_over, ','), $2), ',')
       WHERE id <> $1 AND ($2 = ANY (string_to_array(leads, ',')) OR $2 = ANY (string_to_array(handed_over, ',')))
       RETURNING id`,
      [self, role],
    );
    return rows.map((r) => r.id).sort();
  } catch (err) {
    // The table or its column is not made yet (the first start of a cluster, or of this version on it): no node
    // has claimed anything in it.
    if (['42P01', '42703'].includes((err as { code?: string }).code ?? '')) return [];
    throw err;
  }
}

/**
 * What each of `ids` (former leaders, as formerLeaders named them) last reported it ran (NodesOptions.ran), cleared as
 * it is read so no later takeover tells it again. On the lead's own lock session, as formerLeaders.
 */
export async function takeRan(
  session: LeadSession,
  ids: string[],
): Promise<Map<string, [string, string, string][]>> {
  const out = new Map<string, [string, string, string][]>();
  if (!ids.length) return out;
  const { rows } = await session.query<{ id: string; ran: string }>(
    `UPDATE nodes n SET ran = '[]' FROM (SELECT id, ran FROM nodes WHERE id = ANY($1) FOR UPDATE) old
     WHERE n.id = old.id RETURNING n.id, old.ran`,
    [ids],
  );
  for (const r of rows) {
    try {
      const v = JSON.parse(r.ran);
      if (Array.isArray(v)) out.set(r.id, v);
    } catch {
      // Unreadable: nothing to tell.
    }
  }
  return out;
}

/** The one server of an SQLite store. */
export function localNodes(o: NodesOptions): Nodes {
  const startedAt = new Date().toISOString();
  return {
    self: o.self,
    async list() {
      return [
        {
          ...o.self,
          regions: regionsOf(o.self),
          instances: await o.instances(),
          warm: o.warm?.() ?? {},
          leads: o.leads(),
          epoch: 1,
          startedAt,
          heartbeatAt: new Date().toISOString(),
          healthy: true,
          leased: true,
          stopped: false,
          drained: false,
          handedOver: [],
        },
      ];
    },
    async beat() {},
    async drain() {
      throw new AloneError('this server runs alone on SQLite: there is no other node to hand its work to');
    },
    async handOver() {},
    async close() {},
    fence: () => ({ node: o.self.id, epoch: 1 }),
    refused() {},
  };
}

interface NodeRow {
  id: string;
  address: string;
  region: string;
  regions: string;
  warm: string;
  cores: number;
  memory_mb: number;
  instances: number;
  leads: string;
  epoch: number;
  started_at: Date;
  heartbeat_at: Date;
  healthy: boolean;
  leased: boolean;
  stopped: boolean;
  drained: boolean;
  handed_over: string;
  serving: string;
  replicas: string;
  quotas: string;
}

const SELECT_NODES = `SELECT id, address, region, regions, warm, cores, memory_mb::float8 AS memory_mb, instances, leads,
    epoch::float8 AS epoch, started_at, heartbeat_at, stopped, drained, handed_over, serving, replicas, quotas,
    (NOT stopped AND heartbeat_at > now() - lease_ms * interval '1 millisecond') AS healthy,
    (heartbeat_at > now() - lease_ms * interval '1 millisecond') AS leased
  FROM nodes`;

/**
 * The `leads` a node writes: the roles of `$roles` whose fence (`$locks`, `$pids`, `$marks`, null where none is
 * given) holds at this statement, in order. The arguments are the four parameters' numbers.
 */
const CLAIMED = (roles: number, locks: number, pids: number, marks: number) =>
  `(SELECT coalesce(string_agg(c.role, ',' ORDER BY c.i), '')
    FROM unnest($${roles}::text[], $${locks}::bigint[], $${pids}::int[], $${marks}::int[]) WITH ORDINALITY
      AS c(role, lock, pid, mark, i)
    WHERE c.lock IS NULL OR ${leaderHeld('c.lock', 'c.pid', 'c.mark')})`;

/** The four parameters of CLAIMED: the roles this server leads now, each with its fence (none without `leadFence`). */
function claims(o: NodesOptions): unknown[] {
  const roles: string[] = [];
  const fences: (LeaderFence | null)[] = [];
  for (const role of o.leads()) {
    const f = o.leadFence ? o.leadFence(role) : null;
    if (f === undefined) continue; // its lead is known lost: nothing to claim
    roles.push(role);
    fences.push(f);
  }
  return [
    roles,
    fences.map((f) => f?.lock ?? null),
    fences.map((f) => f?.pid ?? null),
    fences.map((f) => f?.mark ?? null),
  ];
}

/** A node's regions: its first, then the others it serves. */
const regionsOf = (n: NodeSelf) => (n.regions?.length ? n.regions : [n.region]);

/** The warm report as stored; a row written before the column existed (or unreadable) reports none. */
function warmOf(text: string): Record<string, number> {
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

const warmText = (o: NodesOptions) => JSON.stringify(o.warm?.() ?? {});

const viewOf = (r: NodeRow): NodeView => ({
  id: r.id,
  address: r.address,
  region: r.region,
  regions: r.regions ? r.regions.split(',') : [r.region],
  warm: warmOf(r.warm),
  cores: r.cores,
  memoryMb: r.memory_mb,
  instances: r.instances,
  leads: r.leads ? r.leads.split(',') : [],
  epoch: r.epoch,
  startedAt: r.started_at.toISOString(),
  heartbeatAt: r.heartbeat_at.toISOString(),
  healthy: r.healthy,
  leased: r.leased,
  stopped: r.stopped,
  drained: r.drained,
  handedOver: r.handed_over ? r.handed_over.split(',') : [],
  serving: r.serving ? r.serving.split(',') : [],
  replicas: warmOf(r.replicas) as unknown as Record<string, PublishedReplica[]>,
  quotas: warmOf(r.quotas),
});

/** Registers this server in the database's `nodes` table and heartbeats until closed. */
export async function postgresNodes(url: string, o: NodesOptions): Promise<Nodes> {
  const pool = new pg.Pool({ connectionString: url, max: 2, keepAlive: true });
  pool.on('error', (err) =>
    o.warn(err, 'a PostgreSQL connection of the node registry failed; it is replaced'),
  );
  keepClientErrors(pool);
  const c = await pool.connect();
  let epoch: number;
  const registering = performance.now();
  try {
    await ensureSchema(c);
    const { rows } = await c.query<{ epoch: string }>(
      `INSERT INTO nodes (id, address, region, cores, memory_mb, instances, leads, epoch, lease_ms, started_at, heartbeat_at, stopped, regions, warm, quotas)
       VALUES ($1, $2, $3, $4, $5, 0, ${CLAIMED(8, 9, 10, 11)}, 1, $6, now(), now(), false, $7, '{}', $12)
       ON CONFLICT (id) DO UPDATE SET address = $2, region = $3, cores = $4, memory_mb = $5, instances = 0,
         leads = excluded.leads,
         epoch = nodes.epoch + 1, lease_ms = $6, started_at = now(), heartbeat_at = now(), stopped = false,
         regions = $7, warm = '{}', quotas = $12
       RETURNING epoch`,
      [
        o.self.id,
        o.self.address,
        o.self.region,
        o.self.cores,
        o.self.memoryMb,
        o.leaseMs,
        regionsOf(o.self).join(','),
        ...claims(o),
        JSON.stringify(o.self.quotas ?? {}),
      ],
    );
    epoch = Number(rows[0].epoch);
  } catch (e) {
    c.release();
    await pool.end();
    throw e;
  }
  c.release();
  // holding: acts as holder under `epoch`; settling: registered again, re-reading what is placed here; lost: its
  // lease lapsed (it registers again at the next beat); superseded: another process registered with this id.
  let state: 'holding' | 'settling' | 'lost' | 'superseded' = 'settling';
  // When the last renewal that took was sent (this process's monotonic clock): the database's lease runs from a
  // moment after that, so measuring from here finds a lapse no later than the database does.
  let renewedAt = registering;
  const lapsed = () => performance.now() - renewedAt >= o.leaseMs;
  let beating = Promise.resolve();
  const schedule = () => {
    beating = beating.then(beat);
    return beating;
  };
  const lose = (why: string) => {
    if (state !== 'holding' && state !== 'settling') return;
    state = 'lost';
    o.lost?.();
    o.warn(
      undefined,
      `node ${o.self.id} lost its lease (${why}): it starts, wakes and writes nothing for its sandboxes until it has registered again`,
    );
    void schedule();
  };
  const settle = async (at: number) => {
    try {
      await o.settle?.();
    } catch (err) {
      o.warn(err, 'could not re-read what the database places on this node; registering again');
      if (state === 'settling' && epoch === at) state = 'lost';
      return;
    }
    if (state !== 'settling' || epoch !== at) return;
    state = 'holding';
    o.held?.();
  };
  /**
   * A beat's parameters: `$4` the roles and `$6`-`$8` their fences (CLAIMED), read together; `$9` what it ran as
   * leader, `$10` the replicas it serves, `$11` its replicas of each (JSON).
   */
  const beatArgs = async () => {
    const [roles, locks, pids, marks] = claims(o);
    const ran = o.ran?.();
    return [
      o.self.id,
      epoch,
      await o.instances(),
      roles,
      warmText(o),
      locks,
      pids,
      marks,
      ran === undefined ? null : JSON.stringify(ran),
      (o.serving?.() ?? []).join(','),
      JSON.stringify(o.replicas?.() ?? {}),
    ];
  };
  const registerAgain = async () => {
    const sent = performance.now();
    // Only over this process's own registration: a process that took this id meanwhile is not fought.
    const r = await pool.query<{ epoch: string }>(
      `UPDATE nodes SET epoch = epoch + 1, heartbeat_at = now(), stopped = false, instances = $3,
         leads = ${CLAIMED(4, 6, 7, 8)}, warm = $5, ran = coalesce($9, ran), serving = $10, replicas = $11
       WHERE id = $1 AND epoch = $2 RETURNING epoch`,
      await beatArgs(),
    );
    if (r.rowCount === 0) return supersede();
    epoch = Number(r.rows[0].epoch);
    renewedAt = sent;
    state = 'settling';
    o.info?.(`node ${o.self.id} registered again with epoch ${epoch}`);
    void settle(epoch);
  };
  const supersede = () => {
    if (state === 'superseded') return;
    state = 'superseded';
    o.lost?.();
    // Another server started with this node's id (a copied data dir, or a second process on it).
    o.warn(
      undefined,
      `node ${o.self.id} was registered again by another server: this one no longer heartbeats nor acts for its sandboxes`,
    );
  };
  const beat = async () => {
    if (state === 'superseded') return;
    try {
      if (state === 'lost') return await registerAgain();
      const sent = performance.now();
      // Renews only a lease still held: once lapsed (the leader may be placing its sandboxes elsewhere) it is never
      // revived under the same epoch, so a fence the database refused once stays refused.
      const r = await pool.query(
        `UPDATE nodes SET heartbeat_at = now(), instances = $3, leads = ${CLAIMED(4, 6, 7, 8)}, warm = $5,
           ran = coalesce($9, ran), serving = $10, replicas = $11
         WHERE id = $1 AND epoch = $2 AND heartbeat_at + lease_ms * interval '1 millisecond' > clock_timestamp()`,
        await beatArgs(),
      );
      if (r.rowCount === 1) {
        renewedAt = sent;
        return;
      }
      const { rows } = await pool.query<{ epoch: string }>('SELECT epoch FROM nodes WHERE id = $1', [
        o.self.id,
      ]);
      if (rows.length && Number(rows[0].epoch) !== epoch) return supersede();
      lose('its lease lapsed in the database');
      await registerAgain();
    } catch (err) {
      o.warn(err, 'could not renew the node lease');
      if (lapsed()) lose('it could not renew its lease for longer than the lease lasts');
    }
  };
  const timer = setInterval(
    () => {
      beating = beating.then(beat);
    },
    Math.max(200, Math.floor(o.leaseMs / 4)),
  );
  timer.unref();
  // Heartbeating meanwhile: re-reading (and removing what is placed elsewhere) may outlast a lease.
  await settle(epoch);
  return {
    self: o.self,
    beat: schedule,
    fence(): Fence | undefined {
      if (state !== 'holding') return undefined;
      if (!lapsed()) return { node: o.self.id, epoch };
      lose('it could not renew its lease for longer than the lease lasts');
      return undefined;
    },
    refused() {
      void schedule();
    },
    async list() {
      return (await pool.query<NodeRow>(`${SELECT_NODES} ORDER BY id`)).rows.map(viewOf);
    },
    async drain(id, drained) {
      const r = await pool.query('UPDATE nodes SET drained = $2 WHERE id = $1', [id, drained]);
      if (r.rowCount === 0) return undefined;
      return viewOf((await pool.query<NodeRow>(`${SELECT_NODES} WHERE id = $1`, [id])).rows[0]);
    },
    async handOver(role, session) {
      await session.query(
        `UPDATE nodes SET leads = array_to_string(array_remove(string_to_array(leads, ','), $3), ','),
           handed_over = $3 WHERE id = $1 AND epoch = $2`,
        [o.self.id, epoch, role],
      );
    },
    async close() {
      clearInterval(timer);
      await beating;
      await pool
        .query("UPDATE nodes SET stopped = true, leads = '' WHERE id = $1 AND epoch = $2", [o.self.id, epoch])
        .catch((err) => o.warn(err, 'could not mark the node stopped'));
      await pool.end();
    },
  };
}
