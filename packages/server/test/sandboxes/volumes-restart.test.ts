// Volumes across `berth serve` killed with SIGKILL right after each step (create, attach, write, delete): the
// restarted server finishes what was begun, the data is intact, and a deleted volume leaves no mount behind.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { mountsUnder } from '../../src/runtime/linux/disk.js';
import { removeDirLater, removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';
import { TEST_MEMORY_MB } from './support.js';
import { serve, stopped } from '../serve-process.js';

test('volume data and attachments survive kill -9 of the server after every step', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-volrestart-'));
  let server: ChildProcess | undefined;
  let url = '';
  const headers = () => ({
    authorization: `Bearer ${readFileSync(join(dataDir, 'admin.key'), 'utf8').trim()}`,
    'content-type': 'application/json',
  });
  const api = (path: string, method = 'GET', body?: unknown) =>
    fetch(`${url}/v0${path}`, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
  const restart = async () => {
    if (server) {
      server.kill('SIGKILL');
      await stopped(server);
    }
    const s = await serve(dataDir);
    server = s.child;
    url = s.url;
  };
  const until = async (path: string, pred: (b: any, status: number) => boolean) => {
    for (let i = 0; i < 300; i++) {
      const r = await api(path);
      const b = r.status === 404 ? undefined : await r.json();
      if (pred(b, r.status)) return b;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.fail(`${path} never reached the expected state`);
  };
  const execIn = async (sandbox: string, command: string) => {
    const r = await fetch(`${url}/run/default/sandboxes/${sandbox}/process`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ command, waitForCompletion: true }),
    });
    const text = await r.text();
    if (r.status !== 200) {
      // What the server knew of the sandbox then (its events name a restart or an end), to tell a flake apart.
      const o = await (await api(`/sandboxes/${sandbox}`)).text();
      assert.fail(`exec answered ${r.status}: ${text}\nthe sandbox: ${o}`);
    }
    return JSON.parse(text).stdout as string;
  };
  try {
    await restart();
    assert.equal(
      (await api('/volumes', 'POST', { metadata: { name: 'vol' }, spec: { size: 16 } })).status,
      200,
    );
    await restart(); // right after the create: the restarted server makes (or adopts) the image
    await until('/volumes/vol', (b) => b?.status === 'DEPLOYED');

    const spec = { runtime: { memory: TEST_MEMORY_MB }, volumes: [{ name: 'vol', mountPath: '/data' }] };
    const created = await api('/sandboxes', 'POST', { metadata: { name: 'one' }, spec });
    assert.equal(created.status, 200, await created.clone().text());
    assert.equal(await execIn('one', 'echo durable > /data/f && sync && cat /data/f'), 'durable\n');
    await restart(); // with the sandbox holding the volume
    assert.equal((await until('/volumes/vol', (b) => !!b)).state.attachedTo, 'sandbox:one');
    assert.equal(await execIn('one', 'cat /data/f'), 'durable\n');

    assert.equal((await api('/sandboxes/one', 'DELETE')).status, 200);
    await restart(); // mid-way through the sandbox's removal
    await until('/volumes/vol', (b) => b?.state?.attachedTo === undefined);
    const two = await api('/sandboxes', 'POST', { metadata: { name: 'two' }, spec });
    assert.equal(two.status, 200, await two.clone().text());
    assert.equal(await execIn('two', 'cat /data/f'), 'durable\n');
    assert.equal((await api('/sandboxes/two', 'DELETE')).status, 200);
    await until('/volumes/vol', (b) => b?.state?.attachedTo === undefined);

    assert.equal((await api('/volumes/vol', 'DELETE')).status, 200);
    await restart(); // mid-way through the volume's removal
    const t = await until('/volumes/vol', (b, st) => st === 404 || b?.status === 'TERMINATED');
    if (t) assert.ok(t.terminatedAt);
    assert.deepEqual(mountsUnder(join(dataDir, 'volumes')), [], 'no mount left behind');
    // The kernel detaches an autoclear loop device shortly after its last unmount, not within it.
    const loopLeft = () => execFileSync('losetup', ['-a'], { encoding: 'utf8' }).includes(dataDir);
    for (let i = 0; i < 40 && loopLeft(); i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(!loopLeft(), 'no loop device left');
    // The name is free again at once, and the new volume starts empty.
    assert.equal(
      (await api('/volumes', 'POST', { metadata: { name: 'vol' }, spec: { size: 16 } })).status,
      200,
    );
    await until('/volumes/vol', (b) => b?.status === 'DEPLOYED');
    const three = await api('/sandboxes', 'POST', { metadata: { name: 'three' }, spec });
    assert.equal(three.status, 200);
    assert.equal(await execIn('three', 'ls -A /data | grep -v lost+found | wc -l'), '0\n');
  } finally {
    if (server) {
      server.kill('SIGTERM');
      await stopped(server);
    }
    await removeSandboxesIn(dataDir);
    await unmountVolumesIn(dataDir);
    removeDirLater(dataDir);
  }
});
