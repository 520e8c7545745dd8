// bench/sandboxes standby-cycles: byte-exact standby at length (packages/server/test/sandboxes/standby-cycles.ts):
// BENCH_STANDBY_CYCLES (default 1,000) standby and wake-up cycles of a sandbox whose process appends fsync'd records
// to a volume and keeps an in-memory counter, with requests as it freezes and as it thaws, and `berth serve` killed
// with SIGKILL every BENCH_STANDBY_KILL_EVERY (default 100) cycles. Prints what it counted beside what was lost
// (goal: zero).
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const CYCLES = Number(process.env.BENCH_STANDBY_CYCLES ?? 1000);
const KILL_EVERY = Number(process.env.BENCH_STANDBY_KILL_EVERY ?? 100);
const RUNNER = new URL('../../packages/server/test/sandboxes/standby-cycles-run.ts', import.meta.url)
  .pathname;

export async function benchStandbyCycles() {
  header(`byte-exact standby: ${CYCLES} cycles, berth serve killed with SIGKILL every ${KILL_EVERY}`);
  const r = await runTsReport(RUNNER, {
    STANDBY_CYCLES: String(CYCLES),
    STANDBY_KILL_EVERY: String(KILL_EVERY),
  });
  row('standby cycles completed (baseline: asked)', r.cycles, CYCLES, 'cycles');
  row('first calls after a wake-up that failed (baseline: wake-ups)', r.firstCallFailures, r.cycles, 'calls');
  row('other calls that failed (baseline: all calls)', r.otherFailures, r.requests, 'calls');
  row('record bytes lost (baseline: bytes compared)', r.lostBytes, r.bytesCompared, 'bytes');
  row('processes lost (baseline: processes)', r.lostProcesses, 1, 'procs');
  console.log(
    `server kills ${r.serverKills}; requests ${r.requests} (${r.duringFreeze} as it froze, ${r.duringThaw} as it thawed); ${(r.seconds / r.cycles).toFixed(3)} s per cycle`,
  );
  for (const p of r.problems) console.log(p);
  if (r.problems.length) throw new Error(`byte-exact standby: ${r.problems.length} problems`);
}
