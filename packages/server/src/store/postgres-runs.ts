// A run of writes on PostgreSQL in two statements (docs/decisions/076-postgres-write-throughput.md): the callers of a
// group commit whose ops are creates, updates, deletes and fences (no `check`: its list is the database's to answer). Op by op, each caller cost a savepoint,
// a read and a write per op, and its release — four round trips for a one-op write, each waited for under the
// cluster's write lock. Here: one statement reads every object the run names and draws its sequence numbers; the ops
// are judged in memory, caller after caller, exactly as the database would judge them one by one (the write lock is
// held, so nothing else writes meanwhile); one statement writes every change row and each object's final row. The
// fences a run names are asked once per distinct leader and per distinct node lease, one statement each.
import type pg from 'pg';
import { leaderHeld } from './postgres-lead.js';
import {
  type ChangeType,
  FencedError,
  firstKey,
  keyString,
  type ResourceKey,
  type Row,
  StoreError,
  type StoredObject,
  toObject,
  type WriteOp,
} from './store.js';

export type Outcome = { ok: true; out: StoredObject[] } | { ok: false; error: unknown };

/**
 * Every named object as it stands (one row per key, `rv` null where there is none) and, on the first row, `$5` new
 * sequence numbers in increasing order. `changes_seq_seq` is the sequence of `changes.seq` (migration 1's BIGSERIAL).
 */
const READ_RUN = `SELECT k.i, r.rv, r.body,
    CASE WHEN k.i = 1 THEN (SELECT array_agg(v ORDER BY v)
      FROM (SELECT nextval('changes_seq_seq') AS v FROM generate_series(1, $5::int)) s) END AS seqs
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS k(kind, workspace, parent, name, i)
  LEFT JOIN resources r
    ON r.kind = k.kind AND r.workspace = k.workspace AND r.parent = k.parent AND r.name = k.name`;

/**
 * The run's change rows in sequence order, then each object's final row: written (an insert or a replace) or gone.
 * An object appears in one of the two lists at most, so the statement's parts never touch one row twice.
 */
export const WRITE_RUN = `WITH c AS (
    INSERT INTO changes (seq, type, kind, workspace, parent, name, rv, body)
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[])
  ), p AS (
    INSERT INTO resources (kind, workspace, parent, name, rv, body)
    SELECT * FROM unnest($9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::text[])
    ON CONFLICT (kind, workspace, parent, name) DO UPDATE SET rv = excluded.rv, body = excluded.body
  ), d AS (
    DELETE FROM resources r USING unnest($15::text[], $16::text[], $17::text[], $18::text[]) AS g(kind, workspace, parent, name)
    WHERE r.kind = g.kind AND r.workspace = g.workspace AND r.parent = g.parent AND r.name = g.name
  ) SELECT 1`;

/** Ops a run takes: every op but a `check`, whose list the database answers. */
type RunOp = Exclude<WriteOp, { op: 'check' }>;

/** Whether a caller's ops can join a run. */
export const runnable = (ops: WriteOp[]) => ops.every((op) => op.op !== 'check');

/**
 * For each (lock, pid, mark), whether the advisory lock is granted to that backend and the backend holds that mark:
 * the leader's fence (`LEADER_FENCE` in postgres.ts) for every leader a run's callers name, in one statement. Judged
 * under the write lock, as the op by op fence is: one that holds here was the lead when no other server could write.
 */
const LEADS_RUN = `SELECT l.i, ${leaderHeld('l.lock', 'l.pid', 'l.mark')} AS held
  FROM unnest($1::bigint[], $2::int[], $3::int[]) WITH ORDINALITY AS l(lock, pid, mark, i)`;

/** For each (node, epoch) pair, whether the node's lease is held at that epoch by the database's clock now. */
const LEASES_RUN = `SELECT n.i, EXISTS (SELECT 1 FROM nodes WHERE id = n.node AND epoch = n.epoch
    AND heartbeat_at + lease_ms * interval '1 millisecond' > clock_timestamp()) AS leased
  FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS n(node, epoch, i)`;

/** Each distinct tuple a run's fences name (a leader's, a node's lease), and the database's answer for it. */
class Asked {
  private readonly index = new Map<string, number>();
  readonly cols: unknown[][];
  answers: boolean[] = [];
  constructor(width: number) {
    this.cols = Array.from({ length: width }, () => []);
  }
  add(...vals: unknown[]) {
    const k = JSON.stringify(vals);
    if (!this.index.has(k)) {
      this.index.set(k, this.cols[0].length);
      for (let i = 0; i < vals.length; i++) this.cols[i].push(vals[i]);
    }
  }
  holds(...vals: unknown[]): boolean {
    return this.answers[this.index.get(JSON.stringify(vals)) as number] === true;
  }
  async ask(client: pg.PoolClient, name: string, text: string) {
    if (!this.cols[0].length) return;
    const { rows } = await client.query<{ i: number; held?: boolean; leased?: boolean }>({
      name,
      text,
      values: this.cols,
    });
    for (const r of rows) this.answers[r.i - 1] = (r.held ?? r.leased) === true;
  }
}

/** The object's `node` as the holder's fence reads it (`body::json ->> 'node'`). */
function placedOn(row: Row | undefined): string | null {
  if (!row) return null;
  const node = JSON.parse(row.body)?.node;
  if (node === undefined || node === null) return null;
  return typeof node === 'string' ? node : JSON.stringify(node);
}

/** Columns of rows, one array per column, as `unnest` takes them. */
class Columns {
  readonly cols: unknown[][];
  constructor(n: number) {
    this.cols = Array.from({ length: n }, () => []);
  }
  push(...vals: unknown[]) {
    for (let i = 0; i < vals.length; i++) this.cols[i].push(vals[i]);
  }
  append(other: Columns) {
    for (let i = 0; i < other.cols.length; i++) for (const v of other.cols[i]) this.cols[i].push(v);
  }
}

const keyCols = (k: ResourceKey) => [k.kind, k.workspace, k.parent, k.name];

/**
 * Reads what `run` names and judges its callers' ops in order: the outcome of each caller, and the values of
 * `WRITE_RUN` (undefined when no caller's ops apply). Runs inside the transaction, under the write lock.
 */
export async function planRun(
  client: pg.PoolClient,
  run: { ops: WriteOp[] }[],
): Promise<{ outcomes: Outcome[]; values?: unknown[] }> {
  const keys = new Map<string, ResourceKey>();
  const leads = new Asked(3);
  const leases = new Asked(2);
  let opCount = 0;
  for (const w of run)
    for (const op of w.ops as RunOp[]) {
      if (op.op === 'fence' && 'lock' in op) {
        leads.add(op.lock, op.pid, op.mark);
        continue;
      }
      keys.set(keyString(op.key), op.key);
      if (op.op === 'fence') leases.add(op.node, op.epoch);
      else opCount++;
    }
  await leads.ask(client, 'berth_leads_run', LEADS_RUN);
  await leases.ask(client, 'berth_leases_run', LEASES_RUN);
  const named = [...keys.values()];
  const keyColumns = new Columns(4);
  for (const k of named) keyColumns.push(...keyCols(k));
  const { rows } = await client.query<{
    i: number;
    rv: number | null;
    body: string | null;
    seqs: string[] | null;
  }>({
    name: 'berth_read_run',
    text: READ_RUN,
    values: [...keyColumns.cols, opCount],
  });
  /** Each named object as the run has it so far: its row, or undefined once there is none. */
  const state = new Map<string, Row | undefined>();
  let seqs: number[] = [];
  for (const r of rows) {
    const k = named[r.i - 1];
    state.set(keyString(k), r.rv === null ? undefined : { ...k, rv: r.rv, body: r.body as string });
    if (r.seqs) seqs = r.seqs.map(Number);
  }
  const changes = new Columns(8);
  const touched = new Set<string>();
  const outcomes: Outcome[] = [];
  let next = 0;
  for (const w of run) {
    const drawn = next;
    const mine = new Map<string, Row | undefined>();
    const mineChanges = new Columns(8);
    const out: StoredObject[] = [];
    try {
      for (const op of w.ops as RunOp[]) {
        if (op.op === 'fence' && 'lock' in op) {
          if (!leads.holds(op.lock, op.pid, op.mark)) throw new FencedError(firstKey(w.ops), 'lead');
          continue;
        }
        const k = op.key;
        const ks = keyString(k);
        const cur = mine.has(ks) ? mine.get(ks) : state.get(ks);
        if (op.op === 'fence') {
          if (!leases.holds(op.node, op.epoch)) throw new FencedError(k, 'lease');
          if (placedOn(cur) !== op.node) throw new FencedError(k, 'placement');
          continue;
        }
        if (op.op === 'create' && cur) throw new StoreError('exists', k);
        if (op.op !== 'create') {
          if (!cur) throw new StoreError('not_found', k);
          if (op.expectVersion !== undefined && op.expectVersion !== cur.rv)
            throw new StoreError('conflict', k);
        }
        const seq = seqs[next++];
        if (op.op === 'delete') {
          const row = cur as Row;
          mineChanges.push(seq, 'DELETED', ...keyCols(k), row.rv, row.body);
          mine.set(ks, undefined);
          out.push(toObject(row));
          continue;
        }
        const type: ChangeType = op.op === 'create' ? 'ADDED' : 'MODIFIED';
        const body = JSON.stringify('mutate' in op ? op.mutate(toObject(cur as Row)) : op.body);
        if (typeof body !== 'string') throw new TypeError(`the body of ${ks} is not JSON`);
        mineChanges.push(seq, type, ...keyCols(k), null, body);
        mine.set(ks, { ...k, rv: seq, body });
        out.push({ ...k, resourceVersion: seq, body: JSON.parse(body) });
      }
    } catch (error) {
      // As a rolled-back savepoint: nothing of this caller's stays; its sequence numbers go to the next caller.
      next = drawn;
      outcomes.push({ ok: false, error });
      continue;
    }
    for (const [ks, row] of mine) {
      state.set(ks, row);
      touched.add(ks);
    }
    changes.append(mineChanges);
    outcomes.push({ ok: true, out });
  }
  if (!touched.size) return { outcomes };
  const put = new Columns(6);
  const gone = new Columns(4);
  for (const ks of touched) {
    const row = state.get(ks);
    if (row) put.push(...keyCols(row), row.rv, row.body);
    else gone.push(...keyCols(keys.get(ks) as ResourceKey));
  }
  return { outcomes, values: [...changes.cols, ...put.cols, ...gone.cols] };
}
