// The soak, scaled down for the suite (`npm run bench -- soak` runs it for an hour): the mixed load without faults
// while the server's RSS, descriptors and timers, the store's size, the runtime instances and the host's available
// memory are sampled; after warm-up none of the server's may grow past its stated margin (soak.ts), and nothing is
// left on the host.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runLoad } from './harness.js';
import { judgeSoak } from './soak.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 20);
const SEED = Number(process.env.SOAK_SEED ?? 29);

test(`${SECONDS} s of mixed load without faults: the server's and host's resources stay within bounds after warm-up`, {
  timeout: 180_000,
}, async () => {
  const r = await runLoad({
    seconds: SECONDS,
    seed: SEED,
    parts: ['sandboxes', 'volume', 'model', 'mcp', 'preview'],
    sampleEveryMs: 1000,
    churners: 1,
    settleMs: 30_000,
  });
  // The host's memory is printed, not judged: the suite runs other files beside this one (the benchmark judges it).
  const soak = judgeSoak(r.samples, Math.round(SECONDS / 3), false);
  console.log(`soak report: ${JSON.stringify({ counts: r.counts, soak, samples: r.samples })}`);
  assert.deepEqual(r.problems, [], 'every part of the load started');
  assert.deepEqual(r.verdict?.violations, []);
  assert.deepEqual(soak.violations, []);
  assert.deepEqual(r.leftovers, [], 'nothing of the run is left on the host');
  assert.ok((r.counts['sandbox created'] ?? 0) > 0 && (r.counts['model call'] ?? 0) > 0);
});
