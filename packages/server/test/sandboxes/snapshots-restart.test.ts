// Snapshots across a server killed with SIGKILL (decision 053): one taken before is still listed ready after the
// restart and its sandbox restores from it; one whose capture the kill cut short is never listed and leaves no
// files; the sandbox (frozen for the capture when the kill came) answers again. And the per-workspace quota: a
// snapshot past it is a 429 that leaves nothing behind.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { serve, stopped } from '../serve-process.js';
import { removeAllSandboxes } from './support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function client(dataDir: string, url: string) {
  const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const call = async (path: string, method = 'GET', body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const sh = async (name: string, command: string) =>
    (await call(`/run/default/sandboxes/${name}/process`, 'POST', { command, waitForCompletion: true })).body;
  const deployed = async (name: string) => {
    for (let i = 0; i < 400; i++) {
      const r = await call(`/v0/sandboxes/${name}`);
      if (r.body?.status === 'DEPLOYED') return r.body;
      await sleep(50);
    }
    assert.fail(`${name} never DEPLOYED`);
  };
  return { call, sh, deployed };
}

test('a capture cut short by SIGKILL leaves no snapshot; one taken before survives the restart and restores', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-snap-kill-'));
  let server: ChildProcess | undefined;
  try {
    const first = await serve(dataDir);
    server = first.child;
    let c = await client(dataDir, first.url);
    const created = await c.call('/v0/sandboxes', 'POST', {
      metadata: { name: 'kept' },
      spec: { runtime: { memory: 1024 } },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await c.sh('kept', 'echo before > /home/user/mark');
    const kept = await c.call('/v0/sandboxes/kept/snapshots', 'POST', { name: 'kept' });
    assert.equal(kept.status, 200, JSON.stringify(kept.body));
    // Enough that the copy takes a while: the kill lands while it is under way.
    await c.sh('kept', 'head -c 200000000 /dev/urandom > /tmp/big; echo after > /home/user/mark');
    const tmp = join(dataDir, 'snapshots', 'workspaces', 'default', 'tmp');
    const capture = c.call('/v0/sandboxes/kept/snapshots', 'POST', { name: 'half' }).catch(() => undefined);
    for (let i = 0; i < 400 && !(existsSync(tmp) && readdirSync(tmp).length); i++) await sleep(5);
    assert.ok(existsSync(tmp) && readdirSync(tmp).length, 'the capture had started');
    server.kill('SIGKILL');
    await stopped(server);
    await capture;

    const second = await serve(dataDir);
    server = second.child;
    c = await client(dataDir, second.url);
    const listed = await c.call('/v0/sandboxes/kept/snapshots');
    assert.deepEqual(
      listed.body.map((s: any) => [s.name, s.status]),
      [['kept', 'ready']],
    );
    assert.deepEqual(readdirSync(join(dataDir, 'snapshots', 'workspaces', 'default')).sort(), ['layers']);
    assert.equal(readdirSync(join(dataDir, 'snapshots', 'workspaces', 'default', 'layers')).length, 1);
    // Frozen when the kill came, it is adopted as in standby: a request wakes it.
    assert.equal((await c.sh('kept', 'cat /home/user/mark')).stdout.trim(), 'after');
    const restored = await c.call(`/v0/sandboxes/kept/snapshots/${kept.body.id}/restore`, 'POST');
    assert.equal(restored.status, 200, JSON.stringify(restored.body));
    await c.deployed('kept');
    assert.equal((await c.sh('kept', 'cat /home/user/mark')).stdout.trim(), 'before');
    assert.equal(
      (await c.sh('kept', 'test -e /tmp/big && echo there || echo absent')).stdout.trim(),
      'absent',
    );
  } finally {
    if (server) {
      server.kill('SIGKILL');
      await stopped(server);
    }
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
  }
});

test('a snapshot past the workspace’s snapshot quota is a 429 and leaves nothing', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-snap-quota-'));
  let server: ChildProcess | undefined;
  try {
    const s = await serve(dataDir, { BERTH_QUOTA_SNAPSHOT_MB: '2' });
    server = s.child;
    const c = await client(dataDir, s.url);
    const created = await c.call('/v0/sandboxes', 'POST', {
      metadata: { name: 'quota' },
      spec: { runtime: { memory: 256 } },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await c.sh('quota', 'head -c 3000000 /dev/urandom > /home/user/blob');
    const over = await c.call('/v0/sandboxes/quota/snapshots', 'POST', { name: 'too-big' });
    assert.equal(over.status, 429, JSON.stringify(over.body));
    assert.match(over.body.detail, /BERTH_QUOTA_SNAPSHOT_MB/);
    assert.deepEqual((await c.call('/v0/sandboxes/quota/snapshots')).body, []);
    const layers = join(dataDir, 'snapshots', 'workspaces', 'default', 'layers');
    assert.deepEqual(existsSync(layers) ? readdirSync(layers) : [], []);
    await c.sh('quota', 'rm /home/user/blob');
    const fits = await c.call('/v0/sandboxes/quota/snapshots', 'POST', { name: 'fits' });
    assert.equal(fits.status, 200, JSON.stringify(fits.body));
  } finally {
    if (server) {
      server.kill('SIGKILL');
      await stopped(server);
    }
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
  }
});
