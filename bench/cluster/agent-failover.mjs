// bench/cluster agent-failover (packages/server/test/cluster/agent-failover-bench-run.ts,
// docs/decisions/067-builds-ahead.md): how long after kill -9 of the leader the agent answers again through the
// other server, on fresh two-server clusters (issue 24: "agents keep answering"): with its one replica slot (on the
// leader), and with minScale 2, its replicas spread over both nodes (docs/decisions/086-replicas-across-nodes.md):
// there the answering gap is the longest time without an answer from the kill on.
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/agent-failover-bench-run.ts', import.meta.url)
  .pathname;

export async function benchClusterAgentFailover() {
  const r = await runTsReport(RUNNER);
  header(`cluster: the ${r.template} agent after kill -9 of the leader, through the other server`);
  for (const [i, x] of r.runs.entries())
    row(`run ${i + 1}: answers again after (load ${x.load})`, x.answeredMs, undefined, 'ms', '<= 5000 ms');
  const s = await runTsReport(RUNNER, { AGENT_FAILOVER_SPREAD: '1' });
  header(`cluster: the ${s.template} agent with replicas on both nodes, kill -9 of the leader (one of them)`);
  for (const [i, x] of s.runs.entries()) {
    row(`run ${i + 1}: answering gap (load ${x.load})`, x.gapMs, r.runs[i]?.answeredMs, 'ms');
    row(`run ${i + 1}: calls failed after the kill`, x.failed, undefined, '');
  }
  return { single: r, spread: s };
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterAgentFailover();
