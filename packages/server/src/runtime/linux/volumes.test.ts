// Volume images with real loop mounts (root): the cap, persistence across unmount (a reboot), and every state a
// kill -9 can leave between the steps of ensureVolume and removeVolume, each followed by the call a later
// reconcile makes. Run under the runtime flock (loop devices are machine-wide).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { mountsUnder } from './disk.js';
import { ensureVolume, extractArchive, removeVolume, volumeDir } from './volumes.js';

const loopsOf = (img: string) =>
  execFileSync('losetup', ['-j', img], { encoding: 'utf8' }).split('\n').filter(Boolean);

describe('volume images', { skip: process.getuid?.() !== 0 && 'needs root' }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-volimg-'));
  // A data dir without `sandboxes/` is a gone server's to the host sweep (host-sweep-files.ts dataDirGone), and a
  // server another test file starts meanwhile would unmount these volumes under the test.
  mkdirSync(join(dataDir, 'sandboxes'));
  after(async () => {
    // A path mounted twice is listed twice, and a lazy unmount may take both: a second "not mounted" is no leak.
    for (const mp of mountsUnder(dataDir)) {
      const r = spawnSync('umount', ['-l', mp], { encoding: 'utf8' });
      if (r.status !== 0 && !/not mounted/.test(r.stderr)) throw new Error(`umount -l ${mp}: ${r.stderr}`);
    }
    assert.deepEqual(mountsUnder(dataDir), [], 'every mount of the test is gone');
    rmSync(dataDir, { recursive: true, force: true });
  });
  const ref = (name: string) => ({ workspace: 'ws', name });

  it('the size is a hard cap: a write past it fails with ENOSPC', async () => {
    const mnt = await ensureVolume(dataDir, ref('capped'), 8);
    assert.throws(() => writeFileSync(join(mnt, 'big'), Buffer.alloc(16 * 1024 * 1024)), /ENOSPC/);
  });

  it('data survives an unmount (as after a reboot): ensure mounts the same image again', async () => {
    const mnt = await ensureVolume(dataDir, ref('kept'), 8);
    writeFileSync(join(mnt, 'f'), 'kept');
    execFileSync('umount', [mnt]);
    assert.equal(await ensureVolume(dataDir, ref('kept'), 8), mnt);
    assert.equal(readFileSync(join(mnt, 'f'), 'utf8'), 'kept');
  });

  it('a mount left by a killed server is adopted as it is, not mounted twice', async () => {
    const mnt = await ensureVolume(dataDir, ref('adopted'), 8);
    await ensureVolume(dataDir, ref('adopted'), 8);
    assert.equal(mountsUnder(mnt).length, 1);
    assert.equal(loopsOf(join(volumeDir(dataDir, ref('adopted')), 'disk.img')).length, 1);
  });

  it('a kill during creation (half-made image, seed still mounted aside) is cleaned up by the next ensure', async () => {
    const dir = volumeDir(dataDir, ref('half'));
    mkdirSync(join(dir, 'seed'), { recursive: true });
    execFileSync('truncate', ['-s', '8M', join(dir, 'disk.img.tmp')]);
    execFileSync('mkfs.ext4', ['-q', '-F', join(dir, 'disk.img.tmp')]);
    execFileSync('mount', ['-o', 'loop', join(dir, 'disk.img.tmp'), join(dir, 'seed')]);
    writeFileSync(join(dir, 'seed', 'partial'), 'x');
    const mnt = await ensureVolume(dataDir, ref('half'), 8);
    assert.deepEqual(mountsUnder(dir), [mnt]);
    assert.ok(!existsSync(join(mnt, 'partial')), 'nothing of the half-made image');
    assert.ok(!existsSync(join(dir, 'disk.img.tmp')));
  });

  it('remove unmounts, frees the loop device and deletes the data; again, it is a no-op', async () => {
    const mnt = await ensureVolume(dataDir, ref('gone'), 8);
    const img = join(volumeDir(dataDir, ref('gone')), 'disk.img');
    assert.equal(loopsOf(img).length, 1);
    await removeVolume(dataDir, ref('gone'));
    assert.equal(mountsUnder(mnt).length, 0);
    assert.equal(loopsOf(img).length, 0);
    assert.ok(!existsSync(volumeDir(dataDir, ref('gone'))));
    await removeVolume(dataDir, ref('gone'));
  });

  it('removing one workspace volume leaves the same name of another workspace untouched', async () => {
    const a = await ensureVolume(dataDir, { workspace: 'a', name: 'same' }, 8);
    const b = await ensureVolume(dataDir, { workspace: 'b', name: 'same' }, 8);
    writeFileSync(join(b, 'f'), 'b');
    await removeVolume(dataDir, { workspace: 'a', name: 'same' });
    assert.ok(!existsSync(a));
    assert.equal(readFileSync(join(b, 'f'), 'utf8'), 'b');
  });

  it('names that are not plain labels never become paths', () => {
    assert.throws(() => volumeDir(dataDir, { workspace: '..', name: 'x' }), /invalid volume reference/);
    assert.throws(
      () => volumeDir(dataDir, { workspace: 'ws', name: '../../etc' }),
      /invalid volume reference/,
    );
  });

  it('extraction refuses entries that climb out of the volume', async () => {
    const src = mkdtempSync(join(tmpdir(), 'berth-tar-'));
    try {
      writeFileSync(join(src, 'victim'), 'x');
      const evil = join(src, 'evil.tar');
      execFileSync('tar', ['-cf', evil, '-P', '--transform', 's,^,../,', '-C', src, 'victim']);
      const dest = join(src, 'a', 'b');
      mkdirSync(dest, { recursive: true });
      await assert.rejects(extractArchive(evil, dest));
      assert.ok(!existsSync(join(src, 'a', 'victim')));
      assert.equal(statSync(join(src, 'victim')).size, 1);
    } finally {
      rmSync(src, { recursive: true, force: true });
    }
  });
});
