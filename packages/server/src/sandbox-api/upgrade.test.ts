// POST /upgrade against the real daemon (a child process): the code is loaded afresh and takes over in place, so a
// process started before keeps running, keeps its stdin and logs, and ends with its own exit code.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';

let d: TestDaemon;
before(async () => {
  d = await startSandboxDaemon();
});
after(() => d.close());

const json = async (path: string, init?: RequestInit & { json?: unknown }) => {
  const res = await d.fetch(path, init);
  return { status: res.status, body: (await res.json()) as any };
};

test('an upgrade replaces the code in place: a running process keeps running, its stdin, logs and exit code intact', async () => {
  const before = (await json('/health')).body;
  assert.equal(before.upgradeCount, 0);
  assert.equal(before.lastUpgrade.status, 'idle');
  const started = await json('/process', {
    method: 'POST',
    json: { name: 'survivor', command: 'echo before; read line; echo "got $line"; exit 7', stdin: true },
  });
  assert.equal(started.status, 200, JSON.stringify(started.body));

  const up = await json('/upgrade', { method: 'POST', json: {} });
  assert.equal(up.status, 200, JSON.stringify(up.body));
  const health = (await json('/health')).body;
  assert.ok(health.upgradedAt, 'health says the code was replaced');
  // The service SDK's HealthResponse: the system test waits for upgradeCount > 0 and fails on lastUpgrade failed.
  assert.equal(health.upgradeCount, 1);
  assert.equal(health.lastUpgrade.status, 'completed');
  assert.equal(health.lastUpgrade.step, 'completed');
  assert.equal(health.startedAt, before.startedAt, 'the same daemon process: nothing was restarted');

  const during = (await json('/process/survivor')).body;
  assert.equal(during.status, 'running');
  assert.equal(during.pid, started.body.pid);
  const wrote = await d.fetch('/process/survivor/stdin', { method: 'POST', body: 'after-upgrade\n' });
  assert.equal(wrote.status, 200, await wrote.text());
  let end = during;
  for (let i = 0; i < 200 && end.status === 'running'; i++) {
    await new Promise((r) => setTimeout(r, 25));
    end = (await json('/process/survivor')).body;
  }
  assert.equal(end.status, 'failed');
  assert.equal(end.exitCode, 7);
  assert.equal((await json('/process/survivor/logs')).body.stdout, 'before\ngot after-upgrade\n');

  const fresh = await json('/process', {
    method: 'POST',
    json: { command: 'echo new-code', waitForCompletion: true },
  });
  assert.equal(fresh.body.stdout, 'new-code\n');
  const twice = await json('/upgrade', { method: 'POST', json: {} });
  assert.equal(twice.status, 200, 'a second upgrade takes over from the first');
  assert.equal((await json('/health')).body.upgradeCount, 2, 'the count is carried from code to code');
  assert.equal((await json('/process/survivor')).body.exitCode, 7, 'and adopts what the first adopted');
});
