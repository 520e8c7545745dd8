// PostgreSQL backend (the `pg` package), for several servers on one database (docs/decisions/056-cluster-postgres.md).
// Same semantics as sqlite.ts: every write one transaction, resource versions from one sequence, the change feed in
// commit order. Every write transaction first takes one cluster-wide advisory lock: sequence numbers are then handed
// out in commit order (a reader of `seq > n` can never see 11 before 10 commits), and a `check` is serialised with
// every write that could change what it lists, as a per-kind lock would, at the price of one writer at a time. The
// lock is taken once per group of queued writes, and a group's plain writes cost two statements whatever their number
// (postgres-runs.ts, docs/decisions/076-postgres-write-throughput.md), so it is held for a few round trips and a flush.
import pg from 'pg';
import { MIGRATIONS } from './migrations.js';
import { leaderHeld } from './postgres-lead.js';
import { type Outcome, planRun, runnable, WRITE_RUN } from './postgres-runs.js';
import {
  type Change,
  type ChangeType,
  EVERY_WORKSPACE,
  FencedError,
  firstKey,
  type ListQuery,
  type ResourceKey,
  type Row,
  type Store,
  StoreError,
  type StoredObject,
  StoreUnavailableError,
  toObject,
  type WriteOp,
} from './store.js';

/** Advisory lock keys (one 64-bit space per database): writes, and the one-time schema migration. */
const WRITE_LOCK = 0x62657274_0001n;
const MIGRATE_LOCK = 0x62657274_0002n;
/** The channel a commit notifies; the payload is empty: a listener reads the feed from its last sequence. */
const CHANNEL = 'berth_changes';
/** Feed rows read per query while catching up. */
const FEED_PAGE = 1000;
/**
 * Change rows kept: the feed is how other servers learn of a write, so this bounds how far a server may fall behind
 * (a server that starts reads from the newest row; one cut off from the database for longer is not promised more).
 */
const CHANGE_LOG_KEEP = 100_000;

/** BIGINT (oid 20) as a number: resource versions and sequences stay far below 2^53. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

const GET =
  'SELECT kind, workspace, parent, name, rv, body FROM resources WHERE kind = $1 AND workspace = $2 AND parent = $3 AND name = $4';
/** Each write op is one statement: its change row (whose sequence is the new version) and the resource row. */
const CHANGE = `WITH c AS (INSERT INTO changes (type, kind, workspace, parent, name, rv, body)
  VALUES ($1, $2, $3, $4, $5, $7, $6) RETURNING seq)`;
const CREATE = `${CHANGE} INSERT INTO resources (kind, workspace, parent, name, rv, body)
  SELECT $2, $3, $4, $5, seq, $6 FROM c RETURNING rv`;
const UPDATE = `${CHANGE} UPDATE resources r SET rv = c.seq, body = $6 FROM c
  WHERE r.kind = $2 AND r.workspace = $3 AND r.parent = $4 AND r.name = $5 RETURNING r.rv`;
const DELETE = `${CHANGE}, d AS (DELETE FROM resources WHERE kind = $2 AND workspace = $3 AND parent = $4 AND name = $5)
  SELECT seq AS rv FROM c`;

/**
 * A holder's fence (the `fence` op): whether the object is placed on the node (a sandbox's `node`, or among an agent's
 * or function's `replicaNodes`: decision 092), and whether the node's lease (the `nodes` table
 * that cluster/nodes.ts keeps in this database) is held at this epoch. `clock_timestamp()`, not `now()`: the
 * transaction began before it waited for the write lock, and the lease is judged at this statement.
 */
const FENCE = `SELECT coalesce((SELECT body::jsonb ->> 'node' = $5 OR coalesce(body::jsonb -> 'replicaNodes' ? $5, false)
    FROM resources WHERE kind = $1 AND workspace = $2 AND parent = $3 AND name = $4), false) AS placed,
  EXISTS (SELECT 1 FROM nodes WHERE id = $5 AND epoch = $6
    AND heartbeat_at + lease_ms * interval '1 millisecond' > clock_timestamp()) AS leased`;

/**
 * The leader's fence (the `fence` op with a `lock`): the lock granted to that pid, whose session holds that mark
 * (postgres-lead.ts). Read at this statement, under the write lock.
 */
const LEADER_FENCE = `SELECT ${leaderHeld('$1::bigint', '$2::int', '$3::int')} AS held`;

/** Socket errors of a connection that could not be made or was cut. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
/** SQLSTATEs of a server shutting down, starting, or out of connections (class 08 is every connection exception). */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * A failure of the database's reachability, not of the call: `StoreUnavailableError` (answered 503, retried by
 * clients); anything else as it is. pg reports a connection lost mid-query only by its message.
 */
export function unreachable(err: unknown): unknown {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  if (
    CONNECTION_CODES.has(code) ||
    UNAVAILABLE_STATES.has(code) ||
    code.startsWith('08') ||
    (typeof e?.message === 'string' &&
      /^Connection terminated|^timeout exceeded when trying to connect/.test(e.message))
  )
    return new StoreUnavailableError(err);
  return err;
}

export interface PostgresStoreOptions {
  /** How a failure outside any caller's request (the listener, the feed) is reported. */
  warn?: (err: unknown, msg: string) => void;
  /** The feed is also read this often, whatever notifications arrive (a notification lost in a reconnect). */
  pollMs?: number;
  /** Connections in the pool. */
  maxConnections?: number;
}

interface Pending {
  ops: WriteOp[];
  resolve: (o: StoredObject[]) => void;
  reject: (e: unknown) => void;
}

/**
 * Gives each connection of `pool` its own error listener. The pool listens only to idle ones: a connection that
 * breaks while checked out but between two queries (a write's transaction when the database restarts) emitted
 * 'error' with no listener, which ended the process — a follower of a cluster exited 1 under a database restart.
 * The failure shows as that connection's next query's, and the pool drops it on release.
 */
export function keepClientErrors(pool: pg.Pool): void {
  pool.on('connect', (client) => client.on('error', () => undefined));
}

export class PostgresStore implements Store {
  private readonly watchers = new Set<(c: Change) => void>();
  private pending: Pending[] = [];
  private flushing?: Promise<void>;
  private lastSeq = 0;
  private writes = 0;
  private feedQueued?: Promise<void>;
  private feedTail: Promise<void> = Promise.resolve();
  private listener?: pg.Client;
  private poll?: NodeJS.Timeout;
  private reconnect?: NodeJS.Timeout;
  private closed = false;
  private readonly warn: (err: unknown, msg: string) => void;

  private constructor(
    private readonly url: string,
    private readonly pool: pg.Pool,
    opts: PostgresStoreOptions,
  ) {
    this.warn = opts.warn ?? (() => undefined);
  }

  /** Connects, migrates the schema (once per database, whichever server comes first), and starts the feed. */
  static async open(url: string, opts: PostgresStoreOptions = {}): Promise<PostgresStore> {
    const pool = new pg.Pool({
      connectionString: url,
      max: opts.maxConnections ?? 10,
      keepAlive: true,
      types,
    });
    const store = new PostgresStore(url, pool, opts);
    // An idle pooled connection that breaks (the database restarted) is dropped by the pool; its error must not
    // end the process.
    pool.on('error', (err) => store.warn(err, 'a pooled PostgreSQL connection failed; it is replaced'));
    keepClientErrors(pool);
    try {
      await store.migrate();
      const { rows } = await pool.query<{ seq: number | null }>('SELECT max(seq) AS seq FROM changes');
      store.lastSeq = rows[0].seq ?? 0;
      await store.listen();
    } catch (e) {
      await store.close();
      throw e;
    }
    store.poll = setInterval(() => void store.catchUp().catch(() => undefined), opts.pollMs ?? 1000);
    store.poll.unref();
    return store;
  }

  private async migrate() {
    const c = await this.pool.connect();
    try {
      await c.query('BEGIN');
      // Servers starting together: the first migrates, the others wait for it and then find nothing to do.
      await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATE_LOCK]);
      await c.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)',
      );
      const done = new Set(
        (await c.query<{ id: number }>('SELECT id FROM schema_migrations')).rows.map((r) => r.id),
      );
      for (const m of MIGRATIONS) {
        if (done.has(m.id)) continue;
        await c.query(m.postgres);
        await c.query('INSERT INTO schema_migrations (id, applied_at) VALUES ($1, $2)', [
          m.id,
          new Date().toISOString(),
        ]);
      }
      await c.query('COMMIT');
    } catch (e) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      c.release();
    }
  }

  /** LISTEN on a connection of its own; a lost one is replaced, and the feed read in case a notification was missed. */
  private async listen() {
    const client = new pg.Client({ connectionString: this.url, keepAlive: true, types });
    const lost = (err?: unknown) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.end().catch(() => undefined);
      if (this.closed) return;
      if (err) this.warn(err, 'the PostgreSQL change listener lost its connection; reconnecting');
      this.reconnect = setTimeout(() => {
        this.listen()
          .then(() => this.catchUp())
          .catch((e) => lost.call(undefined, e));
      }, 500);
      this.reconnect.unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', () => void this.catchUp().catch(() => undefined));
    await client.connect();
    this.listener = client;
    await client.query(`LISTEN ${CHANNEL}`);
  }

  async get(key: ResourceKey) {
    const { rows } = await this.pool
      .query<Row>({
        name: 'berth_get',
        text: GET,
        values: [key.kind, key.workspace, key.parent, key.name],
      })
      .catch((err) => {
        throw unreachable(err);
      });
    return rows[0] ? toObject(rows[0]) : undefined;
  }

  async list(q: ListQuery) {
    return this.listOn(this.pool, q).catch((err) => {
      throw unreachable(err);
    });
  }

  private async listOn(db: pg.Pool | pg.PoolClient, q: ListQuery): Promise<StoredObject[]> {
    const args: unknown[] = [q.kind];
    const where = ['kind = $1'];
    const arg = (v: unknown) => {
      args.push(v);
      return `$${args.length}`;
    };
    if (typeof q.workspace === 'string') where.push(`workspace = ${arg(q.workspace)}`);
    else if (q.workspace !== EVERY_WORKSPACE) throw new Error(`a list of ${q.kind} names no workspace`);
    if (q.parent !== undefined) where.push(`parent = ${arg(q.parent)}`);
    if (q.after !== undefined) where.push(`name > ${arg(q.after)}`);
    for (const [k, v] of Object.entries(q.labels ?? {}))
      where.push(`(body::json -> 'metadata' -> 'labels' ->> ${arg(k)}) = ${arg(v)}`);
    let sql = `SELECT kind, workspace, parent, name, rv, body FROM resources WHERE ${where.join(' AND ')} ORDER BY name, workspace, parent`;
    if (q.limit !== undefined) sql += ` LIMIT ${arg(q.limit)}`;
    return (await db.query<Row>(sql, args)).rows.map(toObject);
  }

  /**
   * Group commit as in sqlite.ts: writes that arrive while a transaction is open share the next one, each caller's
   * ops in their own savepoint, so one failing write rolls back alone. A promise settles only after the COMMIT (an
   * acknowledged write is durable) and after this server's watchers have seen the change.
   */
  write(ops: WriteOp[]): Promise<StoredObject[]> {
    return new Promise((resolve, reject) => {
      if (this.closed) {
        reject(new Error('the store is closed'));
        return;
      }
      this.pending.push({ ops, resolve, reject });
      this.kick();
    });
  }

  private kick() {
    if (this.flushing || !this.pending.length) return;
    this.flushing = new Promise<void>((done) => setImmediate(done))
      .then(() => this.flush())
      .finally(() => {
        this.flushing = undefined;
        this.kick();
      });
  }

  private async flush() {
    const batch = this.pending;
    this.pending = [];
    const outcomes: Outcome[] = [];
    let client: pg.PoolClient | undefined;
    try {
      client = await this.pool.connect();
      // One round trip: the transaction, the lock, and the notification (sent at COMMIT, once however many changes
      // the transaction holds). The values are this file's constants.
      await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${WRITE_LOCK}), pg_notify('${CHANNEL}', '')`);
      for (let i = 0; i < batch.length; ) {
        const run: Pending[] = [];
        while (i < batch.length && runnable(batch[i].ops)) run.push(batch[i++]);
        // One write alone costs less op by op: the run's statements are heavier than a point read and a write.
        if (run.length > 1) outcomes.push(...(await this.applyRun(client, run)));
        else if (run.length) outcomes.push(await this.applyAlone(client, run[0], batch.length > 1));
        // A write with a check is judged by the database as it stands after the writes before it.
        if (i < batch.length) outcomes.push(await this.applyAlone(client, batch[i++], batch.length > 1));
      }
      await client.query(outcomes.some((o) => o.ok) ? 'COMMIT' : 'ROLLBACK');
      client.release();
      client = undefined;
    } catch (error) {
      // The connection failed or the COMMIT did: nothing of the batch is acknowledged.
      client?.release(error as Error);
      for (const w of batch) w.reject(unreachable(error));
      return;
    }
    await this.catchUp().catch((err) => this.warn(err, 'could not read the change feed after a write'));
    batch.forEach((w, i) => {
      const o = outcomes[i];
      if (o.ok) w.resolve(o.out);
      else w.reject(o.error);
    });
    if (++this.writes % 1000 === 0)
      void this.pool
        .query('DELETE FROM changes WHERE seq < $1', [this.lastSeq - CHANGE_LOG_KEEP])
        .catch((err) => this.warn(err, 'could not trim the change log'));
  }

  /** One caller's ops in a savepoint of its own (when it shares the transaction), op by op. */
  private async applyAlone(client: pg.PoolClient, w: Pending, savepoint: boolean): Promise<Outcome> {
    if (savepoint) await client.query('SAVEPOINT w');
    try {
      const out = await this.applyOps(client, w.ops);
      if (savepoint) await client.query('RELEASE SAVEPOINT w');
      return { ok: true, out };
    } catch (error) {
      if (savepoint) await client.query('ROLLBACK TO SAVEPOINT w');
      return { ok: false, error };
    }
  }

  /**
   * Two or more callers without a `check` (creates, updates, deletes, fences), in two statements whatever their number: one reads
   * every object they name and draws the sequence numbers, the callers' ops are then judged here in order against
   * what was read and what the callers before them wrote (a caller whose op fails leaves nothing, as its savepoint
   * would), and one statement writes the change rows and each object's final row. Under the write lock nothing else
   * writes meanwhile, so this judges exactly as the database would op by op. Should a statement fail (a value the
   * database refuses), the run is rolled back to its savepoint and applied caller by caller, so one bad write fails
   * alone.
   */
  private async applyRun(client: pg.PoolClient, run: Pending[]): Promise<Outcome[]> {
    await client.query('SAVEPOINT r');
    try {
      const planned = await planRun(client, run);
      if (planned.values)
        await client.query({ name: 'berth_write_run', text: WRITE_RUN, values: planned.values });
      return planned.outcomes;
    } catch (error) {
      await client.query('ROLLBACK TO SAVEPOINT r').catch(() => {
        throw error;
      });
      const outcomes: Outcome[] = [];
      for (const w of run) outcomes.push(await this.applyAlone(client, w, true));
      return outcomes;
    }
  }

  /** Applies one caller's ops inside the open transaction (which holds the write lock). */
  private async applyOps(client: pg.PoolClient, ops: WriteOp[]): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    for (const op of ops) {
      if (op.op === 'check') {
        const rows: Record<string, unknown>[][] = [];
        for (const r of op.reads ?? []) rows.push((await client.query(r.text, r.values)).rows);
        op.judge(await this.listOn(client, op.list), op.reads ? rows : undefined);
        continue;
      }
      if (op.op === 'fence' && 'lock' in op) {
        const { rows } = await client.query<{ held: boolean }>({
          name: 'berth_leader_fence',
          text: LEADER_FENCE,
          values: [op.lock, op.pid, op.mark],
        });
        if (!rows[0].held) throw new FencedError(firstKey(ops), 'lead');
        continue;
      }
      if (op.op === 'fence') {
        const k = op.key;
        const { rows } = await client.query<{ placed: boolean; leased: boolean }>({
          name: 'berth_fence',
          text: FENCE,
          values: [k.kind, k.workspace, k.parent, k.name, op.node, op.epoch],
        });
        if (!rows[0].leased) throw new FencedError(k, 'lease');
        if (!rows[0].placed) throw new FencedError(k, 'placement');
        continue;
      }
      const k = op.key;
      const keyArgs = [k.kind, k.workspace, k.parent, k.name];
      const cur = (await client.query<Row>({ name: 'berth_get', text: GET, values: keyArgs })).rows[0];
      if (op.op === 'create' && cur) throw new StoreError('exists', k);
      if (op.op !== 'create') {
        if (!cur) throw new StoreError('not_found', k);
        if (op.expectVersion !== undefined && op.expectVersion !== cur.rv)
          throw new StoreError('conflict', k);
      }
      const type: ChangeType = op.op === 'create' ? 'ADDED' : op.op === 'update' ? 'MODIFIED' : 'DELETED';
      if (op.op === 'delete') {
        const row = cur as Row;
        await client.query({
          name: 'berth_delete',
          text: DELETE,
          values: [type, ...keyArgs, row.body, row.rv],
        });
        out.push(toObject(row));
        continue;
      }
      const body = JSON.stringify('mutate' in op ? op.mutate(toObject(cur as Row)) : op.body);
      const { rows } = await client.query<{ rv: number }>({
        name: op.op === 'create' ? 'berth_create' : 'berth_update',
        text: op.op === 'create' ? CREATE : UPDATE,
        values: [type, ...keyArgs, body, null],
      });
      out.push({ ...k, resourceVersion: rows[0].rv, body: JSON.parse(body) });
    }
    return out;
  }

  /**
   * Delivers every change committed since the last one delivered, from any server, in sequence order. Calls are
   * serialised; a call made while a read runs gets a read that starts after it (so a writer's own change is seen).
   */
  private catchUp(): Promise<void> {
    if (this.feedQueued) return this.feedQueued;
    const next = this.feedTail.then(() => {
      this.feedQueued = undefined;
      return this.readFeed();
    });
    this.feedQueued = next;
    this.feedTail = next.catch(() => undefined);
    return next;
  }

  private async readFeed() {
    if (this.closed) return;
    for (;;) {
      const { rows } = await this.pool.query<Row & { seq: number; type: ChangeType }>({
        name: 'berth_feed',
        text: 'SELECT seq, type, kind, workspace, parent, name, COALESCE(rv, seq) AS rv, body FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2',
        values: [this.lastSeq, FEED_PAGE],
      });
      for (const r of rows) {
        this.lastSeq = r.seq;
        this.notify({ seq: r.seq, type: r.type, object: toObject(r) });
      }
      if (rows.length < FEED_PAGE) return;
    }
  }

  private notify(c: Change) {
    for (const fn of this.watchers) {
      try {
        fn(c);
      } catch {
        // A watcher's failure must not fail a committed write; watchers log their own errors.
      }
    }
  }

  watch(fn: (c: Change) => void) {
    this.watchers.add(fn);
    return () => {
      this.watchers.delete(fn);
    };
  }

  async close() {
    while (this.flushing) await this.flushing;
    this.closed = true;
    clearInterval(this.poll);
    clearTimeout(this.reconnect);
    await this.feedTail;
    this.watchers.clear();
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    await this.pool.end();
  }
}
