// The chaos run, scaled down for the suite (`npm run bench -- chaos` runs it at length, with an agent and more
// faults): sandboxes made, used and deleted, a volume appended to, model calls under a budget, an MCP session, a
// preview under traffic and job executions with retries, while `berth serve`, sandbox daemons, job tasks and the
// egress proxy are killed with SIGKILL and sandboxes' disk and memory are filled. Afterwards every acknowledged
// write is there, every sandbox runs or says why not, nothing is orphaned, the budget held at the provider, every
// execution ended with its attempts counted right, every fault is explained on its object, and nothing of the run
// is left on the host.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runLoad } from './harness.js';

const SECONDS = Number(process.env.CHAOS_SECONDS ?? 25);
const SEED = Number(process.env.CHAOS_SEED ?? 29);

test(`${SECONDS} s of mixed load with faults (seed ${SEED}): nothing acknowledged lost, nothing orphaned, every fault explained`, {
  timeout: 240_000,
}, async () => {
  const r = await runLoad({
    seconds: SECONDS,
    seed: SEED,
    parts: ['sandboxes', 'volume', 'model', 'mcp', 'preview', 'job'],
    faults: { kinds: ['server', 'daemon', 'task', 'proxy', 'fill-disk', 'fill-memory'], everyMs: 2000 },
    churners: 1,
    settleMs: 45_000,
    log: (l) => console.log(`chaos: ${l}`),
  });
  console.log(`chaos report: ${JSON.stringify({ ...r, faults: r.faults.map((f) => f.kind) })}`);
  assert.deepEqual(r.problems, [], 'every part of the load started');
  assert.deepEqual(r.verdict?.violations, []);
  assert.deepEqual(r.leftovers, [], 'nothing of the run is left on the host');
  const injected = r.faults.filter((f) => !f.skipped);
  assert.ok(injected.length >= 3, `faults were injected: ${injected.map((f) => f.kind)}`);
  for (const [kind, e] of Object.entries(r.verdict?.explained ?? {}))
    if (!['server', 'task', 'replica'].includes(kind))
      assert.equal(e.explained, e.injected, `every ${kind} fault is explained by an event on its object`);
  assert.ok((r.counts['sandbox created'] ?? 0) > 0 && (r.counts['volume record'] ?? 0) > 0);
});
