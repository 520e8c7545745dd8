// bench/cluster agent-failover (packages/server/test/cluster/agent-failover-bench-run.ts,
// docs/decisions/067-builds-ahead.md): how long after kill -9 of the leader the agent answers again through the
// other server, on fresh two-server clusters (issue 24: "agents keep answering").
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/agent-failover-bench-run.ts', import.meta.url)
  .pathname;

export async function benchClusterAgentFailover() {
  const r = await runTsReport(RUNNER);
  header(`cluster: the ${r.template} agent after kill -9 of the leader, through the other server`);
  for (const [i, x] of r.runs.entries())
    row(`run ${i + 1}: answers again after (load ${x.load})`, x.answeredMs, undefined, 'ms', '<= 5000 ms');
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterAgentFailover();
