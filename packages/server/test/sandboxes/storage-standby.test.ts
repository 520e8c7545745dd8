// Standby keeps storage: a sandbox frozen while idle and woken by a request still has its volume mounted and
// its live-mounted drive, with the data written before the freeze.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { exec, type SandboxServer, startSandboxServer } from './support.js';
import { removeDirLater, removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';

async function deployed(s: SandboxServer, path: string) {
  for (let i = 0; i < 200; i++) {
    const v = await (await s.api(path)).json();
    if (v.status === 'DEPLOYED') return;
    assert.notEqual(v.status, 'FAILED', JSON.stringify(v.events));
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`${path} never deployed`);
}

describe('storage across standby and wake', () => {
  let s: SandboxServer;
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-stb-'));
  before(async () => {
    s = await startSandboxServer({ BERTH_STANDBY_AFTER: '1' }, dataDir);
  });
  after(async () => {
    await s.close();
    await removeSandboxesIn(dataDir);
    await unmountVolumesIn(dataDir);
    removeDirLater(dataDir);
  });

  it('a volume and a drive stay mounted, with their data, through standby and wake', async () => {
    await s.api('/volumes', { method: 'POST', json: { metadata: { name: 'vol' }, spec: { size: 16 } } });
    await s.api('/drives', { method: 'POST', json: { metadata: { name: 'drv' }, spec: { size: 16 } } });
    await deployed(s, '/volumes/vol');
    await deployed(s, '/drives/drv');
    const sb = await s.create('sleeper', { volumes: [{ name: 'vol', mountPath: '/data' }] });
    const m = await s.run(`${sb.metadata.url}/drives/mount`, {
      method: 'POST',
      json: { driveName: 'drv', mountPath: '/home/user/drv' },
    });
    assert.equal(m.status, 200, await m.text());
    await exec(s, sb.metadata.url, 'echo v > /data/f && echo d > /home/user/drv/f');
    await s.waitFor('sleeper', (b) => b.state === 'STANDBY', 'state STANDBY');
    const r = await exec(
      s,
      sb.metadata.url,
      'cat /data/f /home/user/drv/f; grep -c -e " /data " -e " /home/user/drv " /proc/self/mounts; echo w > /data/g && echo ok',
    );
    assert.deepEqual(r.stdout.trim().split('\n'), ['v', 'd', '2', 'ok'], r.stderr);
    const list = await (await s.run(`${sb.metadata.url}/drives/mount`)).json();
    assert.deepEqual(
      list.mounts.map((x: any) => x.mountPath),
      ['/home/user/drv'],
    );
  });
});
