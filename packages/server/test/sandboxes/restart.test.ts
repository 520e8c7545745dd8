// A sandbox outlives its server: `berth serve` killed with SIGKILL and started again on the same data dir finds
// the sandbox listed, reachable, and its processes untouched.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
import { exec, inspectingDriver, removeAllSandboxes, startSandboxServer, TEST_MEMORY_MB } from './support.js';
import { serve, stopped } from '../serve-process.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

test('a server killed with SIGKILL and started again adopts its running sandbox untouched', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-restart-'));
  let server: ChildProcess | undefined;
  try {
    const first = await serve(dataDir);
    server = first.child;
    const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${first.url}/v0/sandboxes`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ metadata: { name: 'survivor' }, spec: { runtime: { memory: TEST_MEMORY_MB } } }),
    });
    assert.equal(created.status, 200, await created.clone().text());
    const path = '/run/default/sandboxes/survivor';
    const started = await fetch(`${first.url}${path}/process`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        name: 'counter',
        command: 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.01; done',
      }),
    });
    assert.equal(started.status, 200);
    const pid = (await started.json()).pid;
    const driver = await inspectingDriver(dataDir);
    const hostPid = (await driver.inspect(sandboxId('default', 'survivor')))?.pid;
    await driver.close();
    assert.ok(hostPid);

    server.kill('SIGKILL');
    await stopped(server);
    const second = await serve(dataDir);
    server = second.child;

    const list = await (await fetch(`${second.url}/v0/sandboxes`, { headers })).json();
    assert.deepEqual(
      list.map((s: any) => [s.metadata.name, s.status]),
      [['survivor', 'DEPLOYED']],
    );
    const proc = await (await fetch(`${second.url}${path}/process/counter`, { headers })).json();
    assert.equal(proc.pid, pid, 'the same process');
    assert.equal(proc.status, 'running');
    const count = async () =>
      Number(
        (
          await (
            await fetch(`${second.url}${path}/filesystem/${encodeURIComponent('/tmp/n')}`, { headers })
          ).json()
        ).content,
      );
    const a = await count();
    await new Promise((r) => setTimeout(r, 100));
    assert.ok((await count()) > a, 'the counter kept counting');
    const again = await inspectingDriver(dataDir);
    assert.equal(
      (await again.inspect(sandboxId('default', 'survivor')))?.pid,
      hostPid,
      'the sandbox was never restarted',
    );
    await again.close();
  } finally {
    if (server) {
      server.kill('SIGTERM');
      await stopped(server);
    }
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
  }
});

test('a sandbox whose processes died while the server was down is started again, fresh', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-restart-'));
  try {
    const first = await startSandboxServer({}, dataDir);
    const sb = await first.create('phoenix');
    await exec(first, sb.metadata.url, 'echo before > /tmp/marker');
    await first.close();
    const driver = await inspectingDriver(dataDir);
    await driver.cgroup(sandboxId('default', 'phoenix'))!.kill();
    assert.equal((await driver.inspect(sandboxId('default', 'phoenix')))?.state, 'dead');
    await driver.close();

    const second = await startSandboxServer({}, dataDir);
    try {
      const back = await second.waitFor(
        'phoenix',
        (b) => b.status === 'DEPLOYED' && b.events.some((e: any) => /had stopped/.test(e.message)),
        'DEPLOYED again',
      );
      assert.equal(back.state, 'RUNNING');
      assert.deepEqual(
        back.events.map((e: any) => e.status),
        ['DEPLOYING', 'DEPLOYED', 'DEPLOYING', 'DEPLOYED'],
      );
      const marker = await exec(second, back.metadata.url, 'cat /tmp/marker');
      assert.equal(marker.exitCode, 1, 'the new sandbox starts with fresh files');
    } finally {
      await second.close();
    }
  } finally {
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
  }
});
