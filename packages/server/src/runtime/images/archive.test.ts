// Imports of `docker save` tarballs and OCI layout archives, both written by skopeo from a real loopback registry.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { importArchive } from './archive.js';
import { ImageStore } from './image-store.js';
import {
  busyboxLayer,
  loopbackOutbound,
  Pusher,
  startRegistry,
  type TestRegistry,
  tarOf,
} from './test-support/registry.js';

describe('image archives', () => {
  let reg: TestRegistry;
  let dir: string;
  let ref: string;
  let configDigest: string;
  before(async () => {
    reg = await startRegistry();
    dir = mkdtempSync(join(tmpdir(), 'berth-archive-'));
    const layers = [await busyboxLayer(), await tarOf([{ name: 'srv/hello', body: 'archived' }])];
    const img = await new Pusher(reg).image('test/archived', 'v1', layers, { Env: ['X=1'] });
    ref = img.reference;
    configDigest = img.configDigest;
  });
  after(async () => {
    await reg.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const skopeo = (dest: string) =>
    execFileSync('skopeo', ['copy', '--quiet', '--src-tls-verify=false', `docker://${ref}`, dest], {
      stdio: 'pipe',
    });

  it('imports a docker save tarball under the names it carries', async () => {
    const file = join(dir, 'saved.tar');
    skopeo(`docker-archive:${file}:example.com/team/app:1.0`);
    const store = new ImageStore({ dataDir: join(dir, 'd1') });
    const [img] = await importArchive(store, 'ws', createReadStream(file));
    assert.equal(img.id, configDigest);
    assert.deepEqual(img.references, ['example.com/team/app:1.0']);
    assert.deepEqual(img.config.env, ['X=1']);
    assert.equal(readFileSync(join(img.rootfs, 'srv/hello'), 'utf8'), 'archived');
    assert.equal(store.find('ws', 'example.com/team/app:1.0')?.id, configDigest);
    assert.equal(
      store.find('other', 'example.com/team/app:1.0'),
      undefined,
      'for the importing workspace only',
    );
    assert.deepEqual(
      store.heldBy('ws').map((i) => i.id),
      [configDigest],
    );
  });

  it('imports an OCI layout archive; one carrying only a tag needs a name', async () => {
    const file = join(dir, 'oci.tar');
    skopeo(`oci-archive:${file}:v1`);
    const store = new ImageStore({ dataDir: join(dir, 'd2') });
    await assert.rejects(importArchive(store, 'ws', createReadStream(file)), /does not name its image/);
    const [img] = await importArchive(store, 'ws', createReadStream(file), 'local/app:v1');
    assert.equal(img.id, configDigest);
    assert.equal(readFileSync(join(img.rootfs, 'srv/hello'), 'utf8'), 'archived');
    assert.equal(store.find('ws', 'local/app:v1')?.id, configDigest);
  });

  it('refuses what is not an image archive', async () => {
    const file = join(dir, 'plain.tar');
    execFileSync('tar', ['-cf', file, '-C', dir, 'saved.tar']);
    const store = new ImageStore({ dataDir: join(dir, 'd3') });
    await assert.rejects(importArchive(store, 'ws', createReadStream(file), 'x/y'), /not an image archive/);
  });
});

describe('derived images', () => {
  it('a base image plus one directory makes a new image with both trees and the extra Env', async () => {
    const { deriveImage } = await import('./derive.js');
    const { mkdirSync, writeFileSync } = await import('node:fs');
    const reg = await startRegistry();
    const dir = mkdtempSync(join(tmpdir(), 'berth-derive-'));
    try {
      const base = await new Pusher(reg).image('test/base', 'v1', [await busyboxLayer()], {
        Env: ['PATH=/bin'],
      });
      const store = new ImageStore({ dataDir: join(dir, 'd'), outbound: loopbackOutbound() });
      const layer = join(dir, 'layer');
      mkdirSync(join(layer, 'app'), { recursive: true });
      writeFileSync(join(layer, 'app', 'main.py'), 'print(42)\n');
      const img = await deriveImage(store, 'ws', base.reference, layer, 'local/agent:1', {
        env: ['AGENT=1'],
        workingDir: '/app',
      });
      assert.equal(readFileSync(join(img.rootfs, 'app/main.py'), 'utf8'), 'print(42)\n');
      assert.ok(readFileSync(join(img.rootfs, 'bin/busybox')).length > 0, 'the base tree is there');
      assert.deepEqual(img.config.env, ['PATH=/bin', 'AGENT=1']);
      assert.equal(img.config.workingDir, '/app');
      assert.equal(img.layers.length, 2);
      assert.equal(store.find('ws', 'local/agent:1')?.id, img.id);
      assert.notEqual(img.id, base.configDigest);
    } finally {
      await reg.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
