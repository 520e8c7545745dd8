// The chaos run and the soak as a program, for `npm run bench -- chaos` and `-- soak`: CHAOS_MODE (chaos or soak),
// CHAOS_SECONDS of load, CHAOS_SEED; progress on stderr, the report as one JSON line on stdout.
import { ALL_FAULTS, ALL_PARTS, runLoad } from './harness.js';
import { judgeSoak } from './soak.js';

const soak = process.env.CHAOS_MODE === 'soak';
const seconds = Number(process.env.CHAOS_SECONDS ?? (soak ? 3600 : 600));
const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 100_000);
process.stderr.write(`${soak ? 'soak' : 'chaos'}: ${seconds} s, seed ${seed}\n`);
const r = await runLoad({
  seconds,
  seed,
  parts: ALL_PARTS,
  ...(soak ? { sampleEveryMs: 10_000 } : { faults: { kinds: ALL_FAULTS, everyMs: 5000 } }),
  churners: 2,
  settleMs: 120_000,
  log: (l) => process.stderr.write(`${soak ? 'soak' : 'chaos'}: ${l}\n`),
});
const verdict = soak ? judgeSoak(r.samples, Math.min(300, Math.round(seconds / 6))) : undefined;
process.stdout.write(`${JSON.stringify({ ...r, soak: verdict })}\n`);
