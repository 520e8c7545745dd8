// bench/cluster scale (packages/server/test/cluster/scale-bench-run.ts, docs/decisions/063-cluster-flows.md): sandbox
// creates per second through three `berth serve` on one PostgreSQL beside one server, on the same machine; and the
// time until another server leads after kill -9 of the leader beside the same after a clean stop (issue 24's goal:
// failover within 5 s).
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/scale-bench-run.ts', import.meta.url).pathname;

export async function benchClusterScale() {
  const r = await runTsReport(RUNNER);
  header(`cluster: sandbox creates, ${r.creates} at ${r.concurrency} in flight (baseline: one server)`);
  row('creates per second, 3 servers on one machine', r.threeServersPerS, r.oneServerPerS, '/s');
  header('cluster: failover (baseline: the leader stopped cleanly)');
  row(
    'another server leads after kill -9 of the leader',
    r.failoverKillMs,
    r.failoverStopMs,
    'ms',
    '<= 5000 ms',
  );
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterScale();
