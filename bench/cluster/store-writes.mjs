// bench/cluster store-writes (packages/server/test/cluster/store-writes-bench-run.ts,
// docs/decisions/076-postgres-write-throughput.md): the store's writes and reads per second on PostgreSQL (durable,
// from one store and from two on one database: two servers of a cluster) beside the same on SQLite.
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/store-writes-bench-run.ts', import.meta.url)
  .pathname;

export async function benchClusterStoreWrites() {
  const r = await runTsReport(RUNNER);
  const { postgres: p, sqlite: s } = r;
  header(`cluster: the store on PostgreSQL (${r.ops} operations at once; baseline: SQLite)`);
  row('creates per second, one server', p.createsOne, s.createsOne, '/s');
  row('creates per second, two servers on one database', p.createsAll, s.createsAll, '/s');
  row('versioned replaces per second, one server', p.replacesOne, s.replacesOne, '/s');
  row('versioned replaces per second, two servers', p.replacesAll, s.replacesAll, '/s');
  row('updates of one object per second, two servers', p.hotAll, s.hotAll, '/s');
  row('point reads per second', p.reads, s.reads, '/s');
  row('one write at a time, p50', p.sequentialP50Ms, s.sequentialP50Ms, 'ms');
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterStoreWrites();
