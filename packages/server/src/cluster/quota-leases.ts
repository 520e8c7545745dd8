// What each node of a cluster holds against its workspaces' quotas, in the database (docs/decisions/092-cluster-wide-counts.md):
// one row per replica, build or job task running, with the node and the epoch it holds its lease under. A row counts
// only while that node holds that lease (the `nodes` table, cluster/nodes.ts), so a dead node's holdings stop
// counting once its lease lapses, with nothing to clean first. An admission locks its workspace (a transaction
// advisory lock), reads what every live node holds there, judges, and inserts its row in the same transaction: two
// nodes admitting at once are judged one after the other. The judgement itself is the caller's (quota-ledger.ts).
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Fence } from './fencing.js';
import { keepClientErrors } from '../store/postgres.js';

/** What one node holds: a replica, build or job task. */
export interface HeldRow {
  workspace: string;
  consumer: string;
  memoryMb: number;
  owner?: string;
}

/** What live nodes hold in one workspace, grouped. */
export interface HeldGroup extends Omit<HeldRow, 'memoryMb'> {
  count: number;
  memoryMb: number;
  /** Held by the node asking (a deploy there replaces its own replicas, not other nodes'). */
  mine?: boolean;
}

export interface QuotaLeases {
  /**
   * Inserts `row` if `judge` (given what every live node holds in its workspace, this one's rows included, and the
   * workspace's sandboxes as committed in the database) says it fits, under the workspace's lock; `force` inserts it
   * without asking. Resolves to the row's id, or to what the judge returned when it does not fit. Throws when this
   * node holds no lease.
   */
  admit<R>(
    row: HeldRow,
    judge: ((held: HeldGroup[], sandboxes: { body: any }[]) => R | undefined) | 'force',
  ): Promise<{ id: string } | { refused: R }>;
  /**
   * What a sandbox create's store transaction runs before it judges (the `reads` of its `check` op): the workspace's
   * lock, then what the other live nodes hold there; `groups` makes groups of the rows read. Under that lock no
   * admission of any node runs between the create's judgement and its commit, and the create sees every row admitted
   * before it (not the copy read every OTHERS_READ_MS).
   */
  lockedReads(workspace: string): {
    reads: { text: string; values: unknown[] }[];
    groups: (rows: Record<string, unknown>[][]) => HeldGroup[];
  };
  /** Deletes a row (what it counted has ended). */
  release(id: string): Promise<void>;
  /** What the other live nodes hold, grouped (read at each call; the ledger keeps a copy). */
  others(): Promise<HeldGroup[]>;
  /**
   * Deletes the rows of nodes whose lease lapsed more than PRUNE_AFTER_MS ago (a node removed for good, or gone for
   * long): they no longer count, and would otherwise stay for ever. Every node runs it every PRUNE_EVERY_MS.
   */
  prune(): Promise<number>;
  close(): Promise<void>;
}

/**
 * How long past its lease a node's rows stay: far longer than a restart or a network cut, so that a node returning
 * finds its own (it writes them again under its new epoch either way, see `republish`).
 */
const PRUNE_AFTER_MS = 10 * 60_000;
const PRUNE_EVERY_MS = 60_000;

const LIVE = `JOIN nodes n ON n.id = q.node AND n.epoch = q.epoch
  AND n.heartbeat_at + n.lease_ms * interval '1 millisecond' > clock_timestamp()`;
/** Rows grouped by what holds them; `mine` compares with the node given as parameter `$<self>`. */
const grouped = (self: number) =>
  `SELECT q.consumer, q.owner, q.node = $${self} AS mine, count(*)::int AS count, sum(q.memory_mb)::int AS memory_mb`;
/** Distinct from every other advisory lock of Berth's (the store's write lock, leadership): a class of its own. */
const LOCK_CLASS = 0x42_51_55_4f; // "BQUO"

interface Row {
  consumer: string;
  owner: string | null;
  mine: boolean;
  count: number;
  memory_mb: number;
  workspace?: string;
}

const groupOf = (r: Row, workspace: string): HeldGroup => ({
  workspace: r.workspace ?? workspace,
  consumer: r.consumer,
  owner: r.owner ?? undefined,
  mine: r.mine,
  count: r.count,
  memoryMb: r.memory_mb,
});

export async function postgresQuotaLeases(
  url: string,
  o: { self: string; fence: () => Fence | undefined; warn: (err: unknown, msg: string) => void },
): Promise<QuotaLeases> {
  const pool = new pg.Pool({ connectionString: url, max: 3, keepAlive: true });
  pool.on('error', (err) =>
    o.warn(err, 'a PostgreSQL connection of the quota leases failed; it is replaced'),
  );
  keepClientErrors(pool);
  await pool.query(`CREATE TABLE IF NOT EXISTS quota_leases (
    id TEXT PRIMARY KEY, node TEXT NOT NULL, epoch BIGINT NOT NULL, workspace TEXT NOT NULL,
    consumer TEXT NOT NULL, memory_mb INTEGER NOT NULL, owner TEXT)`);
  await pool.query('CREATE INDEX IF NOT EXISTS quota_leases_workspace ON quota_leases (workspace)');
  // Rows this node made under an earlier epoch (it restarted, or registered again): what still runs is admitted
  // again under the current one by its owners (re-adopted at start) or by `republish`.
  /** Rows this process holds, by id, to write again under a new epoch. */
  const mine = new Map<string, HeldRow & { epoch: number }>();
  // An upsert: a row written again under a new epoch may have been pruned meanwhile (a node away for long).
  const insert = (c: pg.ClientBase | pg.Pool, id: string, row: HeldRow, epoch: number) =>
    c.query(
      `INSERT INTO quota_leases (id, node, epoch, workspace, consumer, memory_mb, owner) VALUES ($1,$2,$3,$4,$5,$6,$7)
         ON CONFLICT (id) DO UPDATE SET epoch = EXCLUDED.epoch`,
      [id, o.self, epoch, row.workspace, row.consumer, row.memoryMb, row.owner ?? null],
    );
  // A node that registered again (epoch + 1) still runs what it held: its rows are written under the new epoch.
  let republishing = Promise.resolve();
  const republish = (epoch: number) => {
    republishing = republishing.then(async () => {
      for (const [id, r] of mine) {
        if (r.epoch >= epoch) continue;
        await insert(pool, id, r, epoch);
        r.epoch = epoch;
      }
      await pool.query('DELETE FROM quota_leases WHERE node = $1 AND epoch < $2 AND NOT (id = ANY($3))', [
        o.self,
        epoch,
        [...mine.keys()],
      ]);
    });
    return republishing;
  };
  const prune = async () => {
    const r = await pool.query(
      `DELETE FROM quota_leases q WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = q.node AND n.epoch = q.epoch
         AND n.heartbeat_at + (n.lease_ms + $1) * interval '1 millisecond' > clock_timestamp())`,
      [PRUNE_AFTER_MS],
    );
    return r.rowCount ?? 0;
  };
  const pruning = setInterval(
    () => void prune().catch((err) => o.warn(err, 'could not delete the quota leases of nodes long gone')),
    PRUNE_EVERY_MS,
  );
  pruning.unref();
  let lastEpoch = 0;
  const fence = (): Fence => {
    const f = o.fence();
    if (!f)
      throw new Error('this node holds no lease: it starts nothing (docs/decisions/064-cluster-fencing.md)');
    if (f.epoch !== lastEpoch) {
      lastEpoch = f.epoch;
      void republish(f.epoch).catch((err) =>
        o.warn(err, 'could not write the quota leases under the new epoch'),
      );
    }
    return f;
  };
  return {
    async admit(row, judge) {
      const f = fence();
      const id = randomUUID();
      if (judge === 'force') {
        mine.set(id, { ...row, epoch: f.epoch });
        await insert(pool, id, row, f.epoch);
        return { id };
      }
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, row.workspace]);
        const { rows } = await c.query<Row>(
          `${grouped(2)} FROM quota_leases q ${LIVE} WHERE q.workspace = $1 GROUP BY q.consumer, q.owner, mine`,
          [row.workspace, o.self],
        );
        // The sandboxes as committed: one created on another node a moment ago is not in this node's copy yet, and
        // its create took this lock to judge, so it is either committed now or judges after this row.
        const sandboxes = await c.query<{ body: string }>(
          "SELECT body FROM resources WHERE kind = 'Sandbox' AND workspace = $1",
          [row.workspace],
        );
        const refused = judge(
          rows.map((r) => groupOf(r, row.workspace)),
          sandboxes.rows.map((r) => ({ body: JSON.parse(r.body) })),
        );
        if (refused !== undefined) {
          await c.query('ROLLBACK');
          return { refused };
        }
        await insert(c, id, row, f.epoch);
        await c.query('COMMIT');
        mine.set(id, { ...row, epoch: f.epoch });
        return { id };
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        c.release();
      }
    },
    lockedReads(workspace) {
      return {
        reads: [
          { text: 'SELECT pg_advisory_xact_lock($1, hashtext($2))', values: [LOCK_CLASS, workspace] },
          {
            text: `${grouped(2)} FROM quota_leases q ${LIVE} WHERE q.workspace = $1 AND q.node <> $2
              GROUP BY q.consumer, q.owner, mine`,
            values: [workspace, o.self],
          },
        ],
        groups: (rows) => (rows[1] ?? []).map((r) => groupOf(r as unknown as Row, workspace)),
      };
    },
    async release(id) {
      mine.delete(id);
      await pool.query('DELETE FROM quota_leases WHERE id = $1', [id]);
    },
    async others() {
      const f = o.fence();
      if (f && f.epoch !== lastEpoch) fence();
      const { rows } = await pool.query<Row>(
        `${grouped(1)}, q.workspace FROM quota_leases q ${LIVE} WHERE q.node <> $1
          GROUP BY q.workspace, q.consumer, q.owner, mine`,
        [o.self],
      );
      return rows.map((r) => groupOf(r, r.workspace as string));
    },
    prune,
    async close() {
      clearInterval(pruning);
      await republishing.catch(() => undefined);
      await pool.end();
    },
  };
}
