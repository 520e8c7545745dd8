// bench/chaos: the chaos run and the soak at length (packages/server/test/chaos, decision 050).
// `chaos`: BENCH_CHAOS_SECONDS (default 600) of the mixed load with every fault injected every ~5 s.
// `soak`: BENCH_SOAK_SECONDS (default 3,600) of the mixed load without faults, the server's resources sampled.
// Each prints what it counted beside what was lost (goal: zero); BENCH_CHAOS_SEED repeats a run.
import { header, row } from '../lib/report.mjs';
import { runTsReport } from '../lib/ts-runner.mjs';

const RUNNER = new URL('../../packages/server/test/chaos/run.ts', import.meta.url).pathname;
const seedEnv = process.env.BENCH_CHAOS_SEED ? { CHAOS_SEED: process.env.BENCH_CHAOS_SEED } : {};

function common(r) {
  const counts = Object.entries(r.counts)
    .sort()
    .map(([k, n]) => `${k} ${n}`);
  console.log(`seed ${r.seed}; load: ${counts.join(', ')}`);
  console.log(`objects checked: ${JSON.stringify(r.verdict?.checked ?? {})}`);
  for (const p of [...r.problems, ...(r.verdict?.violations ?? []), ...r.leftovers]) console.log(p);
}

export async function benchChaos() {
  const seconds = Number(process.env.BENCH_CHAOS_SECONDS ?? 600);
  header(`chaos: ${seconds} s of mixed load with faults`);
  const r = await runTsReport(RUNNER, { CHAOS_MODE: 'chaos', CHAOS_SECONDS: String(seconds), ...seedEnv });
  common(r);
  const injected = r.faults.filter((f) => !f.skipped);
  for (const [kind, e] of Object.entries(r.verdict?.explained ?? {}))
    row(`${kind} faults explained by an event (baseline: injected)`, e.explained, e.injected, 'faults');
  row(
    'violations: lost, orphaned, over budget (baseline: faults)',
    r.verdict?.violations.length ?? 0,
    injected.length,
    'items',
  );
  row('left on the host (baseline: slots used)', r.leftovers.length, 1, 'items');
  console.log(
    `server kills ${r.serverKills}; faults skipped (nothing to hit) ${r.faults.length - injected.length}`,
  );
  if (r.problems.length || r.verdict?.violations.length || r.leftovers.length)
    throw new Error('chaos: something was lost, orphaned or left over');
}

export async function benchSoak() {
  const seconds = Number(process.env.BENCH_SOAK_SECONDS ?? 3600);
  header(`soak: ${seconds} s of mixed load without faults`);
  const r = await runTsReport(RUNNER, { CHAOS_MODE: 'soak', CHAOS_SECONDS: String(seconds), ...seedEnv });
  common(r);
  for (const [k, end] of Object.entries(r.soak.end))
    row(
      `${k} at the end, median of the last window (baseline: first window after warm-up)`,
      end,
      r.soak.base[k],
      k,
    );
  for (const [k, peak] of Object.entries(r.soak.peak))
    row(
      `${k} ${k === 'hostAvailableMb' ? 'lowest' : 'peak'} sample after warm-up (baseline: first window)`,
      peak,
      r.soak.base[k],
      k,
    );
  console.log('curve (s rssMb fds timers storeMb instances hostAvailableMb):');
  for (const x of r.samples)
    console.log(
      `  ${x.atS} ${x.rssMb.toFixed(1)} ${x.fds} ${x.timers ?? '-'} ${x.storeMb.toFixed(2)} ${x.instances} ${x.hostAvailableMb.toFixed(0)}`,
    );
  for (const v of r.soak.violations) console.log(v);
  if (r.soak.violations.length || r.verdict?.violations.length || r.leftovers.length)
    throw new Error('soak: a resource grew past its bound or something was left over');
}
