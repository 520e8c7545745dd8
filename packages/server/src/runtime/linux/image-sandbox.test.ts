// Sandboxes on image roots from a real loopback registry (needs root; run under the runtime flock): the image's
// files, Env and WorkingDir are what user processes see, the API daemon runs in an image with no shell and no
// libc, sandboxes of one image share its files; the driver runs images by id only (a controller resolves names in the
// sandbox's workspace first), and refuses a name or an id it lacks.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import { ImageStore } from '../images/image-store.js';
import {
  busyboxLayer,
  loopbackOutbound,
  Pusher,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../images/test-support/registry.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { callSocket } from './test-support/mini-daemon.js';

const T = { timeout: 120_000 };
let dataDir: string;
let driver: LinuxDriver;
let images: ImageStore;
let reg: TestRegistry;
let push: Pusher;

const rootOf = (id: string) => images.get(id)!.rootfs;

/** The image's id, pulled into a workspace as a controller would resolve it. */
const pulled = async (reference: string) => (await images.pull('ws', reference)).id;

async function run(socketPath: string, command: string, workingDir?: string) {
  const r = await callSocket(socketPath, 'POST', '/process', {
    command,
    waitForCompletion: true,
    ...(workingDir ? { workingDir } : {}),
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { exitCode: number; stdout: string; stderr: string; logs: string };
}

let umask: number;
before(async () => {
  umask = process.umask(0o077); // as `berth serve` runs: nothing of an image root may depend on the umask
  dataDir = mkdtempSync(join(tmpdir(), 'berth-imgsbx-'));
  reg = await startRegistry();
  push = new Pusher(reg);
  // The real daemon from dist; a warm pool, so images in use get one too.
  images = new ImageStore({ dataDir, outbound: loopbackOutbound() });
  driver = await createLinuxDriver({ dataDir, images, warmPoolSize: 1 });
});

after(async () => {
  for (const s of await driver.list()) await driver.remove(s.id);
  await driver.close();
  await reg.stop();
  rmSync(dataDir, { recursive: true, force: true });
  process.umask(umask);
});

describe('sandboxes on image roots', () => {
  it(
    'user processes see the image files, its Env and its WorkingDir; two sandboxes share its files',
    T,
    async () => {
      const app = await tarOf([
        { name: 'srv/', type: 'directory' },
        { name: 'srv/hello.txt', body: 'from the image\n' },
        { name: 'etc/os-release', body: 'ID=berth-test\n' },
      ]);
      const img = await push.image('test/busybox', 'v1', [await busyboxLayer(), app], {
        Env: ['PATH=/bin', 'GREETING=hi from config'],
        WorkingDir: '/srv',
      });
      const id = await pulled(img.reference);
      const a = await driver.ensure('img-a', smallSandboxSpec({ image: id }));
      const b = await driver.ensure('img-b', smallSandboxSpec({ image: id }));
      const out = await run(
        a.socketPath,
        'sh -c "pwd; cat hello.txt; echo $GREETING; cat /etc/os-release; ls /usr/bin/node || echo nonode"',
      );
      assert.equal(out.exitCode, 0, out.stderr);
      assert.equal(out.stdout, '/srv\nfrom the image\nhi from config\nID=berth-test\nnonode\n');
      // The image's own /etc, with this host's resolvers and the sandbox's hostname.
      assert.match((await run(a.socketPath, 'cat /etc/hostname')).stdout, /sandbox/);
      // Files shared: the same inode backs /bin/busybox in both sandboxes.
      const ino = async (sock: string) => (await run(sock, 'stat -c %i /bin/busybox')).stdout.trim();
      assert.equal(await ino(a.socketPath), await ino(b.socketPath));
      assert.equal(
        Number(await ino(a.socketPath)),
        statSync(join(images.get(id)!.rootfs, 'bin/busybox')).ino,
      );
      // The image is written over in each sandbox's own layer: the other sandbox and the image are untouched.
      assert.equal((await run(a.socketPath, 'sh -c "echo mine > /srv/hello.txt"')).exitCode, 0);
      assert.equal((await run(a.socketPath, 'cat /srv/hello.txt')).stdout, 'mine\n');
      assert.equal((await run(b.socketPath, 'cat /srv/hello.txt')).stdout, 'from the image\n');
      assert.equal(readFileSync(join(images.get(id)!.rootfs, 'srv/hello.txt'), 'utf8'), 'from the image\n');
      // No loader or library setting of the daemon leaks into user processes.
      assert.doesNotMatch((await run(a.socketPath, 'env')).stdout, /LD_|berth-host/);
    },
  );

  it(
    'the whole image is the root: files at its top, its /var, /home and /root; writes anywhere land in the sandbox layer, survive a freeze, meet the cap',
    T,
    async () => {
      const app = await tarOf([
        { name: 'mark.txt', body: 'at the root\n' },
        { name: 'docker-entrypoint.sh', body: '#!/bin/sh\necho entry\n', mode: 0o755 },
        { name: 'var/', type: 'directory' },
        { name: 'var/www/', type: 'directory' },
        { name: 'var/www/index.html', body: '<h1>www</h1>\n' },
        { name: 'home/', type: 'directory' },
        { name: 'home/node/', type: 'directory' },
        { name: 'home/node/app.js', body: 'console.log(1)\n' },
        { name: 'root/', type: 'directory', mode: 0o700 },
        { name: 'root/.cache/', type: 'directory' },
        { name: 'root/.cache/pip', body: 'cached\n' },
        { name: 'etc/app.conf', body: 'a=1\n', mode: 0o640 },
      ]);
      const img = await push.image('test/whole', 'v1', [await busyboxLayer(), app], { Env: ['PATH=/bin'] });
      const id = await pulled(img.reference);
      const s = await driver.ensure('img-whole', smallSandboxSpec({ image: id, diskMb: 8 }));
      const cat = async (p: string) => (await run(s.socketPath, `cat ${p}`)).stdout;
      assert.equal(await cat('/mark.txt'), 'at the root\n');
      assert.equal((await run(s.socketPath, '/docker-entrypoint.sh')).stdout, 'entry\n');
      assert.equal(await cat('/var/www/index.html'), '<h1>www</h1>\n');
      assert.equal(await cat('/home/node/app.js'), 'console.log(1)\n');
      assert.equal(await cat('/root/.cache/pip'), 'cached\n');
      assert.equal(
        (await run(s.socketPath, 'stat -c %a /etc/app.conf')).stdout,
        '640\n',
        'modes as the image has them',
      );
      // What a package manager does: new files in /usr, an edited /etc file, a removed file.
      const write = await run(
        s.socketPath,
        'sh -c "mkdir -p /usr/lib/pkg && echo lib > /usr/lib/pkg/f && echo b=2 >> /etc/app.conf && rm /var/www/index.html"',
      );
      assert.equal(write.exitCode, 0, write.stderr);
      const upper = join(driver.layerDir('img-whole')!, 'ovl', 'root', 'upper');
      assert.equal(readFileSync(join(upper, 'usr/lib/pkg/f'), 'utf8'), 'lib\n', 'in the sandbox layer');
      assert.ok(
        statSync(join(upper, 'var/www/index.html')).isCharacterDevice(),
        'the removal is a whiteout there',
      );
      const rootfs = images.get(id)!.rootfs;
      assert.equal(readFileSync(join(rootfs, 'etc/app.conf'), 'utf8'), 'a=1\n', 'the image is untouched');
      assert.ok(statSync(join(rootfs, 'var/www/index.html')).isFile());
      await driver.freeze('img-whole');
      await driver.thaw('img-whole');
      assert.equal(await cat('/usr/lib/pkg/f'), 'lib\n', 'kept across standby');
      assert.equal(await cat('/etc/app.conf'), 'a=1\nb=2\n');
      assert.notEqual((await run(s.socketPath, 'cat /var/www/index.html')).exitCode, 0);
      const big = await run(s.socketPath, 'sh -c "busybox dd if=/dev/zero of=/usr/lib/big bs=1M count=16"');
      assert.notEqual(big.exitCode, 0, 'a write into the image meets the disk cap');
      assert.match(big.stderr, /No space left on device/);
      await driver.remove('img-whole');
    },
  );

  it(
    "a build step's sandbox: layers stacked over the image (or nothing), another user, its changes read back as overlayfs keeps them",
    T,
    async () => {
      const img = await push.image('test/steps', 'v1', [await busyboxLayer()], { Env: ['PATH=/bin'] });
      const id = await pulled(img.reference);
      const steps = mkdtempSync(join(dataDir, 'steps-'));
      // A first step's changes, as a lower of the next one.
      const one = join(steps, 'one');
      const s1 = await driver.ensure('img-step-1', smallSandboxSpec({ image: id }));
      const w1 = await run(
        s1.socketPath,
        'sh -c "mkdir -p /app/old && echo 1 > /app/old/x && echo a > /app/a && echo k > /keep"',
      );
      assert.equal(w1.exitCode, 0, w1.stderr);
      await driver.exportChanges('img-step-1', one);
      await driver.remove('img-step-1');
      assert.equal(readFileSync(join(one, 'app/a'), 'utf8'), 'a\n');
      assert.equal(statSync(join(one, 'app/a')).uid, 0, 'owned by root, as every lower layer');
      assert.equal(readdirSync(one).sort().join(','), 'app,keep', 'nothing of the runtime in it');
      // The second step runs over it, as uid 1000, and removes and replaces.
      const two = join(steps, 'two');
      const s2 = await driver.ensure('img-step-2', {
        ...smallSandboxSpec({ image: id }),
        layers: [one],
        user: '1000:1000',
      });
      const w2 = await run(
        s2.socketPath,
        'sh -c "id -u; cat /app/a /keep; rm /app/a; rm -r /app/old; mkdir /app/old; echo 2 > /app/old/y"',
      );
      assert.equal(w2.stdout, '1000\na\nk\n', w2.stderr);
      await driver.exportChanges('img-step-2', two);
      await driver.remove('img-step-2');
      assert.ok(statSync(join(two, 'app/a')).isCharacterDevice(), 'a deletion is a whiteout');
      assert.equal(readFileSync(join(two, 'app/old/y'), 'utf8'), '2\n');
      // On nothing at all (FROM scratch): the layers are the whole root.
      const s3 = await driver.ensure('img-step-3', {
        ...smallSandboxSpec({ image: 'scratch' }),
        layers: [two, one, rootOf(id)],
      });
      assert.equal(
        (await run(s3.socketPath, 'sh -c "ls /app/old; cat /keep; ls /app"')).stdout,
        'y\nk\nold\n',
      );
      await driver.remove('img-step-3');
    },
  );

  it('the daemon serves exec and files in an image with no shell and no libc', T, async () => {
    const img = await push.image('test/noshell', 'v1', [await busyboxLayer(false)]);
    const s = await driver.ensure('img-noshell', smallSandboxSpec({ image: await pulled(img.reference) }));
    const out = await run(s.socketPath, '/bin/busybox echo static only');
    assert.equal(out.stdout, 'static only\n');
    const put = await callSocket(s.socketPath, 'PUT', '/filesystem/tmp/note.txt', { content: 'kept' });
    assert.ok(put.status < 300, JSON.stringify(put.body));
    const got = await callSocket(s.socketPath, 'GET', '/filesystem/tmp/note.txt');
    assert.equal(got.status, 200);
    assert.equal((await run(s.socketPath, '/bin/busybox ls /bin')).stdout, 'busybox\n');
  });

  it("user processes run as the image's User, looked up in its /etc/passwd", T, async () => {
    const users = await tarOf([
      { name: 'etc/passwd', body: 'root:x:0:0::/root:/bin/sh\napp:x:1234:2345::/home/app:/bin/sh\n' },
      { name: 'etc/group', body: 'root:x:0:\nappgrp:x:2345:\n' },
    ]);
    const img = await push.image('test/user', 'v1', [await busyboxLayer(), users], {
      User: 'app',
      Env: ['PATH=/bin'],
    });
    const s = await driver.ensure('img-user', smallSandboxSpec({ image: await pulled(img.reference) }));
    const out = await run(s.socketPath, 'sh -c "id -u; id -g; touch /tmp/mine && stat -c %u /tmp/mine"');
    assert.equal(out.stdout, '1234\n2345\n1234\n', out.stderr);
    const bad = await push.image('test/user', 'v2', [await busyboxLayer()], { User: 'nobody-here' });
    await assert.rejects(
      driver.ensure('img-user-bad', smallSandboxSpec({ image: await pulled(bad.reference) })),
      /User "nobody-here" is not defined/,
    );
  });

  it(
    'an image in use gets warm sandboxes as its recent creates ask, and a create that takes one refills at once',
    T,
    async () => {
      const img = await push.image('test/pooled', 'v1', [await busyboxLayer()], {
        Env: ['PATH=/bin', 'P=1'],
      });
      const id = await pulled(img.reference);
      await driver.ensure('img-pool-a', smallSandboxSpec({ image: id }));
      await driver.poolsIdle();
      const pool = driver.imagePoolOf(id);
      assert.ok(pool, 'the image has a pool');
      assert.equal(pool.readyCount, 2, "the pool's base, and one for the create of the last minute");
      const waiting = pool.readyRecords();
      assert.ok(
        waiting.every((r) => r.rootfs),
        'the waiting sandboxes run on the image',
      );
      const b = await driver.ensure('img-pool-b', smallSandboxSpec({ image: id, envs: { Q: '2' } }));
      assert.ok(
        waiting.some((r) => r.pid === b.pid),
        'the create took a waiting sandbox',
      );
      assert.equal((await run(b.socketPath, 'sh -c "echo $P$Q"')).stdout, '12\n');
      // Replaced as the create ends, not after the refill pause, which every create of any image pushes on.
      assert.equal(
        pool.readyCount + pool.startingCount,
        3,
        'grown to its base and two creates, refilling now',
      );
      await driver.poolsIdle();
      assert.equal(pool.readyCount, 3);
    },
  );

  it(
    'a name, or an id the store lacks, fails the start with the reason and leaves nothing running',
    T,
    async () => {
      const img = await push.image('test/by-name', 'v1', [await busyboxLayer()]);
      await pulled(img.reference);
      await assert.rejects(
        driver.ensure('img-by-name', smallSandboxSpec({ image: img.reference })),
        /the runtime runs images by id .*resolved in the sandbox's workspace first/,
      );
      assert.equal(await driver.inspect('img-by-name'), undefined);
      const missing = `sha256:${'0'.repeat(64)}`;
      await assert.rejects(
        driver.ensure('img-missing', smallSandboxSpec({ image: missing })),
        /image sha256:0+ is not in the image store/,
      );
      assert.equal(await driver.inspect('img-missing'), undefined);
    },
  );
});
