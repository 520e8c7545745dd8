// bench/api fuzz: the API fuzzer of packages/server/test/fuzz at length (BENCH_FUZZ_RUNS, default 10,000 requests;
// BENCH_FUZZ_SEED to replay one). Prints what it sent and what went wrong (goal: no 5xx, no failure), and the time
// per fuzzed request (each write is bracketed by the reads that check it changed nothing when refused) beside the
// same-run baseline of the cheapest authenticated read.
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNS = Number(process.env.BENCH_FUZZ_RUNS ?? 10_000);
const SEED = Number(process.env.BENCH_FUZZ_SEED ?? Date.now() % 100_000);
const RUNNER = new URL('../../packages/server/test/fuzz/run.ts', import.meta.url).pathname;

export async function benchFuzz() {
  header(`API fuzzer: ${RUNS} requests from GET /v0/openapi.json, seed ${SEED}`);
  const r = await runTsReport(RUNNER, { FUZZ_RUNS: String(RUNS), FUZZ_SEED: String(SEED) });
  console.log(`statuses: ${JSON.stringify(r.byStatus)}`);
  row(
    'fuzz: requests answered (baseline: sent)',
    r.sent - r.failures.filter((f) => /no answer/.test(f)).length,
    r.sent,
    'req',
  );
  row('fuzz: ms per fuzzed request (baseline: GET /v0/quotas)', r.msPerRequest, r.baselineMs, 'ms');
  console.log(
    `5xx seen: ${r.serverErrors} (upstream 502/504 of operations that call out, and documented 501s, included)`,
  );
  console.log(`refused writes compared before and after: ${r.refusedWritesChecked}`);
  console.log(`failures: ${r.failures.length} (goal 0)`);
  for (const f of r.failures) console.log(f);
  if (r.failures.length) throw new Error(`the fuzzer found ${r.failures.length} failures (seed ${r.seed})`);
}
