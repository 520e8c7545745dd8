// The store's throughput on PostgreSQL beside SQLite (bench/cluster/store-writes.mjs,
// docs/decisions/076-postgres-write-throughput.md), printed as one JSON line. PostgreSQL runs durable (fsync and
// synchronous_commit on, as in production); SQLite as `berth serve` runs it. Each figure from STORE_OPS operations
// started at once:
// - creates per second, from one store, and from two stores on one database (two servers of a cluster, half each);
// - replaces (an update naming the version read, as a PUT) per second of distinct objects, one store and two;
// - read-modify-write updates per second of one object from two stores (the controllers' hot object);
// - point reads per second; and the latency of one write at a time (p50).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresStore } from '../../src/store/postgres.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import type { ResourceKey, Store } from '../../src/store/store.js';
import { startPostgres } from '../../src/test-support/postgres.js';

const OPS = Number(process.env.STORE_OPS ?? 2000);
const SEQUENTIAL = Number(process.env.STORE_SEQUENTIAL ?? 300);
const BODY = {
  metadata: { labels: { team: 'bench' }, displayName: 'a policy of the benchmark' },
  spec: { type: 'maxToken', maxTokens: { output: 100000, granularity: 'hour' } },
};
const key = (name: string): ResourceKey => ({ kind: 'Policy', workspace: 'ws', parent: '', name });

const perSecond = async (n: number, run: () => Promise<unknown>) => {
  const t = performance.now();
  await run();
  return n / ((performance.now() - t) / 1000);
};

/** `stores` share OPS operations, all started at once; op i runs on store i % stores.length. */
const spread = (stores: Store[], op: (s: Store, i: number) => Promise<unknown>) =>
  perSecond(OPS, () => Promise.all(Array.from({ length: OPS }, (_, i) => op(stores[i % stores.length], i))));

async function figures(stores: Store[], prefix: string) {
  const [one] = stores;
  const createsOne = await spread([one], (s, i) =>
    s.write([{ op: 'create', key: key(`${prefix}a${i}`), body: BODY }]),
  );
  const createsAll = await spread(stores, (s, i) =>
    s.write([{ op: 'create', key: key(`${prefix}b${i}`), body: BODY }]),
  );
  const versions = await Promise.all(
    Array.from({ length: OPS }, async (_, i) => (await one.get(key(`${prefix}b${i}`)))?.resourceVersion),
  );
  const replace = (s: Store, i: number) =>
    s.write([
      { op: 'update', key: key(`${prefix}b${i}`), body: { ...BODY, n: i }, expectVersion: versions[i] },
    ]);
  const replacesOne = await spread([one], replace);
  for (let i = 0; i < OPS; i++) versions[i] = (await one.get(key(`${prefix}b${i}`)))?.resourceVersion;
  const replacesAll = await spread(stores, replace);
  await one.write([{ op: 'create', key: key(`${prefix}hot`), body: { n: 0 } }]);
  const hotAll = await spread(stores, (s) =>
    s.write([{ op: 'update', key: key(`${prefix}hot`), mutate: (c) => ({ n: c.body.n + 1 }) }]),
  );
  const hot = (await one.get(key(`${prefix}hot`)))?.body.n;
  if (hot !== OPS) throw new Error(`the hot object counted ${hot} of ${OPS} updates`);
  const reads = await spread([one], (s, i) => s.get(key(`${prefix}b${i}`)));
  const lat: number[] = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t = performance.now();
    await one.write([{ op: 'update', key: key(`${prefix}hot`), mutate: (c) => ({ n: c.body.n + 1 }) }]);
    lat.push(performance.now() - t);
  }
  lat.sort((a, b) => a - b);
  return {
    createsOne,
    createsAll,
    replacesOne,
    replacesAll,
    hotAll,
    reads,
    sequentialP50Ms: lat[Math.floor(lat.length / 2)],
  };
}

const dir = mkdtempSync(join(tmpdir(), 'berth-store-bench-'));
const pg = await startPostgres({ durable: true });
try {
  const sqlite = new SqliteStore(join(dir, 'berth.db'));
  let sqliteFigures: Awaited<ReturnType<typeof figures>>;
  try {
    sqliteFigures = await figures([sqlite], 's');
  } finally {
    await sqlite.close();
  }
  const url = await pg.database();
  const a = await PostgresStore.open(url);
  const b = await PostgresStore.open(url);
  let postgresFigures: Awaited<ReturnType<typeof figures>>;
  try {
    postgresFigures = await figures([a, b], 'p');
  } finally {
    await a.close();
    await b.close();
  }
  console.log(JSON.stringify({ ops: OPS, sqlite: sqliteFigures, postgres: postgresFigures }));
} finally {
  await pg.stop();
  rmSync(dir, { recursive: true, force: true });
}
