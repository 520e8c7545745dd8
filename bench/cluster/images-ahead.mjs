// bench/cluster images-ahead (packages/server/test/cluster/images-ahead-bench-run.ts, docs/decisions/087-images-ahead.md):
// the window between an image import's answer and its second copy on another node, answered at once and answered
// after the second copy (issue 24: "kill -9 of any one loses no acknowledged write").
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/cluster/images-ahead-bench-run.ts', import.meta.url)
  .pathname;

export async function benchClusterImagesAhead() {
  const r = await runTsReport(RUNNER);
  header(`cluster: an image of busybox + ${r.mb} MB imported through the leader (load ${r.load.join('–')})`);
  for (const [what, runs] of Object.entries({
    'answered at once': r.answeredAtOnce,
    'answered after the second copy': r.answeredAfterSecondCopy,
  }))
    for (const [i, x] of runs.entries()) {
      row(`${what}, run ${i + 1}: import answered in`, x.answerMs, undefined, 'ms');
      row(
        `${what}, run ${i + 1}: second copy after the answer (copies ${x.copies})`,
        x.secondCopyAfterMs,
        undefined,
        'ms',
      );
    }
  return r;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchClusterImagesAhead();
