// bench/cluster app-copies (packages/server/test/cluster/app-copies-bench-run.ts,
// docs/decisions/094-built-apps-across-nodes.md): how long the second node of a cluster takes to have an agent's built
// app when a replica slot lands on it, copied from the node that built it, against building it itself (same run).
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/app-copies-bench-run.ts', import.meta.url)
  .pathname;

export async function benchClusterAppCopies() {
  const r = await runTsReport(RUNNER);
  header(`cluster: the ${r.template} agent's app on the second node, copied vs built there`);
  for (const [i, x] of r.runs.entries()) {
    const load = `load ${x.copied.load}/${x.built.load}`;
    row(`run ${i + 1}: app had after (${load})`, x.copied.haveMs, x.built.haveMs, 'ms');
    row(`run ${i + 1}: replica serving after`, x.copied.servingMs, x.built.servingMs, 'ms');
    row(
      `run ${i + 1}: copy as node-b logged it, vs the leader's build`,
      x.copied.copyMs,
      x.copied.leaderBuildMs,
      'ms',
    );
  }
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterAppCopies();
