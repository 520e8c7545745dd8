// The cost of the leader's fence (bench/cluster/leader-fence.mjs, docs/decisions/068-leader-fence.md), printed as one
// JSON line: a controller-style write (a read-modify-write update of one object, one at a time) on the tests'
// PostgreSQL, plain and fenced on the leader's lock, in alternating rounds of the same run; then the fenced write again
// with OTHER_SESSIONS more sessions each holding advisory locks (pg_locks reads the whole lock table, so its size is
// what the fence's cost could grow with).
import pg from 'pg';
import { PostgresStore } from '../../src/store/postgres.js';
import { markSession } from '../../src/cluster/leadership.js';
import type { ResourceKey, Store, WriteOp } from '../../src/store/store.js';
import { startPostgres } from '../../src/test-support/postgres.js';

const WRITES = Number(process.env.FENCE_WRITES ?? 2000);
const ROUNDS = Number(process.env.FENCE_ROUNDS ?? 2);
const OTHER_SESSIONS = Number(process.env.FENCE_OTHER_SESSIONS ?? 100);
const KEY: ResourceKey = { kind: 'Model', workspace: 'ws', parent: '', name: 'm' };

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function timed(store: Store, fence: WriteOp[]): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < WRITES; i++) {
    const t = process.hrtime.bigint();
    await store.write([
      ...fence,
      { op: 'update', key: KEY, mutate: (cur) => ({ ...cur.body, observedGeneration: i }) },
    ]);
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out;
}

const db = await startPostgres();
const clients: pg.Client[] = [];
try {
  const url = await db.database();
  const store = await PostgresStore.open(url);
  const session = async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    clients.push(c);
    return c;
  };
  const leader = await session();
  const { rows } = await leader.query<{ lock: string; pid: number }>(
    `SELECT pg_advisory_lock(k), k::text AS lock, pg_backend_pid() AS pid
       FROM (SELECT hashtextextended('berth leader controllers', 0) AS k) role`,
  );
  const fence: WriteOp[] = [
    { op: 'fence', lock: rows[0].lock, pid: rows[0].pid, mark: await markSession(leader) },
  ];
  await store.write([{ op: 'create', key: KEY, body: { status: 'DEPLOYED' } }]);
  await timed(store, fence); // warm-up: prepared statements, caches
  const plain: number[][] = [];
  const fenced: number[][] = [];
  for (let r = 0; r < ROUNDS; r++) {
    plain.push(await timed(store, []));
    fenced.push(await timed(store, fence));
  }
  for (let i = 0; i < OTHER_SESSIONS; i++)
    await (await session()).query('SELECT pg_advisory_lock($1), pg_advisory_lock($2)', [i, -i - 1]);
  const crowded = await timed(store, fence);
  const crowdedPlain = await timed(store, []);
  await store.close();
  const stats = (xs: number[]) => ({ p50: pct(xs, 50), p99: pct(xs, 99) });
  process.stdout.write(
    `${JSON.stringify({
      writes: WRITES,
      plain: plain.map(stats),
      fenced: fenced.map(stats),
      otherSessions: OTHER_SESSIONS,
      crowdedFenced: stats(crowded),
      crowdedPlain: stats(crowdedPlain),
    })}\n`,
  );
} finally {
  for (const c of clients) await c.end().catch(() => undefined);
  await db.stop();
}
