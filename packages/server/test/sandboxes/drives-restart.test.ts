// Drive mounts across `berth serve` killed with SIGKILL (and stopped with SIGTERM): the mounts stay in the
// sandbox, and the restarted server lists them (read back from the sandbox's mount table), unmounts them, and
// detaches a deleted drive from the sandboxes that still have it.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { removeDirLater, removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';
import { serve, stopped } from '../serve-process.js';
import { TEST_MEMORY_MB } from './support.js';

test('drive mounts are listed and unmounted after kill -9 and a restart; a deleted drive leaves the sandboxes', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-driverestart-'));
  let server: ChildProcess | undefined;
  let url = '';
  const headers = () => ({
    authorization: `Bearer ${readFileSync(join(dataDir, 'admin.key'), 'utf8').trim()}`,
    'content-type': 'application/json',
  });
  const call = (path: string, method = 'GET', body?: unknown) =>
    fetch(`${url}${path}`, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
  const restart = async (signal: NodeJS.Signals) => {
    if (server) {
      server.kill(signal);
      await stopped(server);
    }
    const s = await serve(dataDir);
    server = s.child;
    url = s.url;
  };
  const until = async (path: string, pred: (b: any, status: number) => boolean) => {
    for (let i = 0; i < 300; i++) {
      const r = await call(path);
      const b = r.status === 404 ? undefined : await r.json();
      if (pred(b, r.status)) return b;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.fail(`${path} never reached the expected state`);
  };
  const box = '/run/default/sandboxes/one';
  const execIn = async (command: string) => {
    const r = await call(`${box}/process`, 'POST', { command, waitForCompletion: true });
    assert.equal(r.status, 200);
    return (await r.json()).stdout as string;
  };
  const listed = async () => {
    const r = await call(`${box}/drives/mount`);
    assert.equal(r.status, 200);
    return (await r.json()).mounts.map((m: any) => [m.driveName, m.drivePath, m.mountPath, m.readOnly]);
  };
  try {
    await restart('SIGKILL');
    assert.equal(
      (await call('/v0/drives', 'POST', { metadata: { name: 'shared' }, spec: { size: 16 } })).status,
      200,
    );
    await until('/v0/drives/shared', (b) => b?.status === 'DEPLOYED');
    const spec = { runtime: { memory: TEST_MEMORY_MB } };
    const created = await call('/v0/sandboxes', 'POST', { metadata: { name: 'one' }, spec });
    assert.equal(created.status, 200, await created.clone().text());
    await until('/v0/sandboxes/one', (b) => b?.status === 'DEPLOYED');
    const mount = async (body: object) => {
      const r = await call(`${box}/drives/mount`, 'POST', body);
      assert.equal(r.status, 200, await r.text());
    };
    await mount({ driveName: 'shared', mountPath: '/home/user/all' });
    assert.equal(
      await execIn('mkdir -p "/home/user/all/sub dir" && echo kept > "/home/user/all/sub dir/f" && echo ok'),
      'ok\n',
    );
    await mount({ driveName: 'shared', mountPath: '/tmp/only sub', drivePath: '/sub dir', readOnly: true });
    const both = [
      ['shared', '/', '/home/user/all', false],
      ['shared', '/sub dir', '/tmp/only sub', true],
    ];
    assert.deepEqual(await listed(), both);

    await restart('SIGKILL');
    assert.deepEqual(await listed(), both, 'the list after kill -9');
    assert.equal(await execIn('cat "/tmp/only sub/f"'), 'kept\n');
    const un = await call(`${box}/drives/mount/home/user/all`, 'DELETE');
    assert.equal(un.status, 200, await un.text());
    assert.equal(await execIn('ls -A /home/user/all | wc -l'), '0\n');
    assert.deepEqual(await listed(), [both[1]]);

    await restart('SIGTERM');
    assert.deepEqual(await listed(), [both[1]], 'the list after a clean restart');

    // A drive deleted while mounted is detached from the sandbox, which keeps no view of it.
    assert.equal((await call('/v0/drives/shared', 'DELETE')).status, 200);
    await until('/v0/drives/shared', (b, st) => st === 404 || b?.status === 'TERMINATED');
    assert.deepEqual(await listed(), []);
    assert.equal(await execIn('ls -A "/tmp/only sub" | wc -l'), '0\n');
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
