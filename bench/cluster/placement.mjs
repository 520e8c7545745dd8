// bench/cluster placement (packages/server/test/cluster/placement-bench-run.ts, docs/decisions/059-cluster-placement.md):
// a placement decision's p50/p99 (best of two over 100 nodes by the load the placement index keeps) beside a
// least-loaded scan of every node, goal p99 <= 0.1 ms; and the p50 of a request to a sandbox through a server that is
// not its node beside the same request through its node (two `berth serve` on one PostgreSQL), goal added <= 0.3 ms.
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/placement-bench-run.ts', import.meta.url).pathname;

export async function benchClusterPlacement() {
  const r = await runTsReport(RUNNER);
  header(
    `cluster: placement decision (${r.nodes} nodes, ${r.sandboxes} sandboxes placed; baseline a least-loaded scan)`,
  );
  const us = (ms) => ms * 1000;
  row('placement decision p50', us(r.placeP50), us(r.scanP50), 'µs');
  row('placement decision p99', us(r.placeP99), us(r.scanP99), 'µs', '<= 100 µs');
  header(
    `cluster: a sandbox's /health through another node (baseline: through its node, ${r.requests} each)`,
  );
  row('request via another node p50', r.viaP50, r.ownP50, 'ms');
  row('request via another node p99', r.viaP99, r.ownP99, 'ms');
  row('added by the hop, p50', r.viaP50 - r.ownP50, r.ownP50, 'ms', '<= 0.3 ms');
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterPlacement();
