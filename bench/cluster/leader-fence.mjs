// bench/cluster leader-fence (packages/server/test/cluster/leader-fence-bench-run.ts, docs/decisions/068-leader-fence.md):
// a controller-style write (read-modify-write update of one object, one at a time) on PostgreSQL fenced on the
// leader's lock beside the same write plain, p50/p99 per alternating round of the same run, and with 100 more sessions
// holding advisory locks (the lock table the fence reads).
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/leader-fence-bench-run.ts', import.meta.url)
  .pathname;

export async function benchClusterLeaderFence() {
  const r = await runTsReport(RUNNER);
  header(
    `cluster: a leader's write fenced on its lock (${r.writes} sequential updates; baseline the same unfenced)`,
  );
  r.fenced.forEach((f, i) => {
    row(`fenced write p50, round ${i + 1}`, f.p50, r.plain[i].p50, 'ms');
    row(`fenced write p99, round ${i + 1}`, f.p99, r.plain[i].p99, 'ms');
  });
  row(
    `fenced write p50, ${r.otherSessions} more sessions holding locks`,
    r.crowdedFenced.p50,
    r.crowdedPlain.p50,
    'ms',
  );
  row(
    `fenced write p99, ${r.otherSessions} more sessions holding locks`,
    r.crowdedFenced.p99,
    r.crowdedPlain.p99,
    'ms',
  );
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterLeaderFence();
