// Volumes end to end, with real loop mounts and real sandboxes: the cap is the file system's (ENOSPC inside),
// data outlives its sandbox and the server, a read-only mount stays read-only for root inside, templates seed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { exec, type SandboxServer, startSandboxServer } from './support.js';
import { removeDirLater, removeSandboxesIn, unmountVolumesIn } from '../../src/test-support/sandboxes.js';

async function deployed(s: SandboxServer, name: string): Promise<any> {
  for (let i = 0; i < 200; i++) {
    const v = await (await s.api(`/volumes/${name}`)).json();
    if (v.status === 'DEPLOYED' || v.status === 'FAILED') return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`volume ${name} never settled`);
}

async function volume(s: SandboxServer, name: string, spec: object) {
  const r = await s.api('/volumes', { method: 'POST', json: { metadata: { name }, spec } });
  assert.equal(r.status, 200, await r.text());
  const v = await deployed(s, name);
  assert.equal(v.status, 'DEPLOYED', JSON.stringify(v.events));
  return v;
}

async function remove(s: SandboxServer, name: string) {
  await s.api(`/sandboxes/${name}`, { method: 'DELETE' });
  await s.waitFor(name, (b, st) => st === 404 || b.status === 'TERMINATED', 'TERMINATED');
}

describe('volumes in real sandboxes', () => {
  let s: SandboxServer;
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-vol-'));
  before(async () => {
    s = await startSandboxServer({}, dataDir);
  });
  after(async () => {
    await s.close();
    await removeSandboxesIn(dataDir);
    await unmountVolumesIn(dataDir);
    removeDirLater(dataDir);
  });

  it('data written in one sandbox is read back in the next, with its mode, and a write past the cap is ENOSPC', async () => {
    await volume(s, 'data', { size: 16 });
    const one = await s.create('one', { volumes: [{ name: 'data', mountPath: '/data' }] });
    assert.equal(one.status, 'DEPLOYED');
    const w = await exec(
      s,
      one.metadata.url,
      'echo kept > /data/f && chmod 640 /data/f && mkdir -p /data/d && echo ok',
    );
    assert.equal(w.stdout.trim(), 'ok', w.stderr);
    const full = await exec(s, one.metadata.url, 'dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; sync');
    assert.match(full.stdout, /No space left on device/);
    const held = await s.api('/volumes/data');
    assert.equal((await held.json()).state.attachedTo, 'sandbox:one');
    // A second holder is refused at once, naming the first.
    const second = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'two' }, spec: { volumes: [{ name: 'data', mountPath: '/data' }] } },
    });
    assert.equal(second.status, 409);
    assert.match((await second.json()).detail, /attached to sandbox:one/);
    const del = await s.api('/volumes/data', { method: 'DELETE' });
    assert.equal(del.status, 409);

    await remove(s, 'one');
    // Stored under one fixed uid on disk (each sandbox's mount is id-mapped to it): nothing to re-own at attach.
    const onHost = statSync(join(dataDir, 'volumes', 'default', 'data', 'mnt', 'f'));
    assert.deepEqual([onHost.uid, onHost.gid, onHost.mode & 0o777], [0, 0, 0o640]);
    const again = await s.create('again', { volumes: [{ name: 'data', mountPath: '/data' }] });
    const r = await exec(
      s,
      again.metadata.url,
      'rm -f /data/big; cat /data/f; stat -c %a:%u /data/f; test -d /data/d && echo dir',
    );
    assert.deepEqual(r.stdout.trim().split('\n'), ['kept', '640:0', 'dir']);
    await remove(s, 'again');
  });

  it('a volume mounted read-only cannot be written by root inside, nor remounted read-write', async () => {
    await volume(s, 'ro', { size: 16 });
    const rw = await s.create('writer', { volumes: [{ name: 'ro', mountPath: '/data' }] });
    await exec(s, rw.metadata.url, 'echo original > /data/f');
    await remove(s, 'writer');
    const ro = await s.create('reader', { volumes: [{ name: 'ro', mountPath: '/data', readOnly: true }] });
    const r = await exec(
      s,
      ro.metadata.url,
      'id -u; cat /data/f; sh -c "echo x > /data/f" 2>&1; echo w=$?; mount -o remount,rw /data 2>&1; echo m=$?; cat /data/f',
    );
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines[0], '0', 'root inside');
    assert.equal(lines[1], 'original');
    assert.ok(
      lines.some((l: string) => /Read-only file system/.test(l)),
      r.stdout,
    );
    assert.ok(!lines.includes('w=0'));
    assert.ok(!lines.includes('m=0'), r.stdout);
    assert.equal(lines.at(-1), 'original');
    await remove(s, 'reader');
  });

  it('a template version seeds a new volume, and an archive with a path out of the volume is refused', async () => {
    const src = mkdtempSync(join(tmpdir(), 'berth-tpl-'));
    try {
      mkdirSync(join(src, 'pkg'));
      writeFileSync(join(src, 'pkg', 'a.txt'), 'from the template');
      const tgz = join(src, 'v1.tgz');
      execFileSync('tar', ['-czf', tgz, '-C', src, 'pkg']);
      await s.api('/volume_templates', { method: 'POST', json: { metadata: { name: 'tpl' }, spec: {} } });
      const up = await s.api('/volume_templates/tpl/versions/v1', {
        method: 'PUT',
        headers: { 'content-type': 'application/gzip' },
        body: readFileSync(tgz),
      });
      const v = await up.json();
      assert.equal(up.status, 200, JSON.stringify(v));
      assert.equal(v.contentSize, readFileSync(tgz).length);
      const evil = join(src, 'evil.tar');
      execFileSync('tar', ['-cf', evil, '-P', '--transform', 's,^,../../,', '-C', src, 'pkg/a.txt']);
      const bad = await s.api('/volume_templates/tpl/versions/v2', {
        method: 'PUT',
        headers: { 'content-type': 'application/x-tar' },
        body: readFileSync(evil),
      });
      assert.equal(bad.status, 422);
      assert.match((await bad.json()).errors[0].message, /outside the volume/);

      await volume(s, 'seeded', { size: 16, template: 'tpl:v1' });
      const sb = await s.create('seeded', { volumes: [{ name: 'seeded', mountPath: '/data' }] });
      const r = await exec(s, sb.metadata.url, 'cat /data/pkg/a.txt');
      assert.equal(r.stdout, 'from the template');
      await remove(s, 'seeded');
    } finally {
      rmSync(src, { recursive: true, force: true });
    }
  });
});
