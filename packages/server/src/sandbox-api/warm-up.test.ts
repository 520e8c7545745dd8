// A daemon started for a warm pool (BERTH_SANDBOX_WARM_UP=1) serves its own process path before it listens:
// nothing of that shows to its first client.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';
import type { HealthResponse, ProcessJson } from './schema.js';

let d: TestDaemon;
before(async () => {
  d = await startSandboxDaemon({ BERTH_SANDBOX_WARM_UP: '1' });
});
after(() => d.close());

test('a warmed-up daemon lists no process of its own and runs the first exec as any other', async () => {
  assert.deepEqual(await (await d.fetch('/process')).json(), []);
  const health = (await (await d.fetch('/health')).json()) as HealthResponse;
  assert.equal(health.runningProcesses, 0);
  const res = await d.fetch('/process', {
    method: 'POST',
    json: { command: 'echo first', waitForCompletion: true },
  });
  const p = (await res.json()) as ProcessJson;
  assert.equal(p.exitCode, 0);
  assert.equal(p.stdout, 'first\n');
  const listed = (await (await d.fetch('/process')).json()) as ProcessJson[];
  assert.deepEqual(
    listed.map((x) => x.command),
    ['echo first'],
  );
  // The warm-up's own environment setting never reaches a user's process.
  const env = await d.fetch('/process', {
    method: 'POST',
    json: { command: 'env', waitForCompletion: true },
  });
  assert.ok(!((await env.json()) as ProcessJson).stdout.includes('BERTH_SANDBOX_WARM_UP'));
});
