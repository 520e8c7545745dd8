// The image store against a real registry (Debian's docker-registry on loopback) with images each test builds.
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Outbound } from '../../outbound/index.js';
import { ImageError } from './errors.js';
import { ImageStore } from './image-store.js';
import {
  blobFile,
  busyboxLayer,
  loopbackOutbound,
  Pusher,
  startRegistry,
  startTokenFront,
  type TestRegistry,
  tarOf,
} from './test-support/registry.js';

const dirs: string[] = [];
const newStore = (extra: Partial<ConstructorParameters<typeof ImageStore>[0]> = {}) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-images-'));
  dirs.push(dataDir);
  return new ImageStore({ dataDir, outbound: loopbackOutbound(), ...extra });
};
const rejectsWith = async (p: Promise<unknown>, code: string, re: RegExp) => {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof ImageError, String(e));
    assert.equal(e.code, code, e.message);
    assert.match(e.message, re);
    return true;
  });
};

describe('image store with an anonymous registry', () => {
  let reg: TestRegistry;
  let push: Pusher;
  before(async () => {
    reg = await startRegistry();
    push = new Pusher(reg);
  });
  after(async () => {
    await reg.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('pulls by tag and by digest into one root with whiteouts, opaque dirs and hard links applied', async () => {
    const l1 = await busyboxLayer();
    const l2 = await tarOf([
      { name: 'app/', type: 'directory' },
      { name: 'app/keep', body: 'keep' },
      { name: 'app/gone', body: 'gone' },
      { name: 'data/', type: 'directory' },
      { name: 'data/old', body: 'old' },
      { name: 'secret', body: 'owner only', mode: 0o4700 },
    ]);
    const l3 = await tarOf([
      { name: 'app/.wh.gone' },
      { name: 'data/new', body: 'new' },
      { name: 'data/.wh..wh..opq' },
      { name: 'app/link', type: 'link', linkname: 'app/keep' },
      { name: 'app/gone2', body: 're-created' },
    ]);
    const img = await push.image('test/whiteouts', 'v1', [l1, l2, l3], {
      Env: ['A=1', 'PATH=/bin'],
      WorkingDir: '/app',
    });
    const store = newStore();
    const got = await store.pull(img.reference);
    assert.equal(got.id, img.configDigest);
    assert.equal(got.digest, img.digest);
    assert.deepEqual(got.config.env, ['A=1', 'PATH=/bin']);
    assert.equal(got.config.workingDir, '/app');
    const r = got.rootfs;
    assert.equal(readFileSync(join(r, 'app/keep'), 'utf8'), 'keep');
    assert.ok(!existsSync(join(r, 'app/gone')), 'a whiteout deletes the file of a lower layer');
    assert.equal(readFileSync(join(r, 'app/gone2'), 'utf8'), 're-created');
    assert.deepEqual(
      readdirSync(join(r, 'data')),
      ['new'],
      'an opaque dir hides what lower layers put there',
    );
    assert.equal(statSync(join(r, 'app/link')).ino, statSync(join(r, 'app/keep')).ino);
    const mode = statSync(join(r, 'secret')).mode & 0o7777;
    assert.equal(mode, 0o777, 'setuid dropped; the owner bits given to everyone (one uid in a sandbox)');
    assert.ok(lstatSync(join(r, 'bin/sh')).isSymbolicLink());
    const byDigest = await store.pull(`${reg.host}/test/whiteouts@${img.digest}`);
    assert.equal(byDigest.rootfs, got.rootfs, 'one root per image, whatever the name');
    assert.equal(store.find(`${reg.host}/test/whiteouts:v1`)?.id, img.configDigest);
  });

  it('an unknown tag or repository fails with NOT_FOUND naming the image', async () => {
    const store = newStore();
    await rejectsWith(
      store.pull(`${reg.host}/test/nothing:here`),
      'NOT_FOUND',
      /test\/nothing:here: not found/,
    );
  });

  it('an unreachable registry fails with UNREACHABLE', async () => {
    await rejectsWith(newStore().pull('127.0.0.1:1/x:y'), 'UNREACHABLE', /127\.0\.0\.1:1.*unreachable/);
  });

  it('a registry on loopback is refused without the setting, before anything is sent', async () => {
    const img = await push.image('test/closed', 'v1', [await tarOf([{ name: 'f', body: 'x' }])]);
    for (const outbound of [undefined, new Outbound({ allowCidrs: ['0.0.0.0/0', '::/0'] })])
      await rejectsWith(
        newStore({ outbound }).pull(img.reference),
        'REFUSED',
        /127\.0\.0\.1 is loopback \(BERTH_OUTBOUND_ALLOW_CIDRS=127\.0\.0\.0\/8 opens it\)/,
      );
  });

  it('a redirect to a closed address is not followed: each hop is judged', async () => {
    const img = await push.image('test/redirected', 'v1', [await tarOf([{ name: 'f', body: 'y' }])]);
    let closedHits = 0;
    const closed = createServer((_q, r) => {
      closedHits++;
      r.end();
    });
    await new Promise<void>((r) => closed.listen(0, '127.0.0.2', r));
    // A registry front whose blobs answer 307 to another loopback address (as registries send blobs to storage).
    const front = createServer(async (req, res) => {
      if (req.url?.includes('/blobs/'))
        return void res
          .writeHead(307, { location: `http://127.0.0.2:${(closed.address() as AddressInfo).port}/blob` })
          .end();
      const up = await fetch(`http://${reg.host}${req.url}`, {
        headers: { accept: req.headers.accept ?? '*/*' },
      });
      const headers: Record<string, string> = {};
      for (const h of ['content-type', 'docker-content-digest'])
        if (up.headers.get(h)) headers[h] = up.headers.get(h)!;
      res.writeHead(up.status, headers).end(Buffer.from(await up.arrayBuffer()));
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    try {
      const ref = img.reference.replace(reg.host, `127.0.0.1:${(front.address() as AddressInfo).port}`);
      const onlyFront = new Outbound({ allowCidrs: ['127.0.0.1/32'] });
      await rejectsWith(newStore({ outbound: onlyFront }).pull(ref), 'REFUSED', /127\.0\.0\.2 is loopback/);
      assert.equal(closedHits, 0);
      const got = await newStore({ outbound: new Outbound({ allowCidrs: ['127.0.0.0/8'] }) })
        .pull(ref)
        .catch((e) => e);
      assert.ok(closedHits > 0, 'opened, the redirect is followed (what it then serves is not a blob)');
      assert.ok(got instanceof ImageError);
    } finally {
      closed.close();
      front.close();
    }
  });

  it('a layer whose bytes do not match its digest is refused and nothing is kept', async () => {
    const img = await push.image('test/corrupt', 'v1', [
      await tarOf([{ name: 'f', body: 'x'.repeat(1000) }]),
    ]);
    const f = blobFile(reg, img.layers[0]);
    const bytes = readFileSync(f);
    bytes[bytes.length - 5] ^= 0xff;
    writeFileSync(f, bytes);
    const store = newStore();
    await rejectsWith(store.pull(img.reference), 'CORRUPT', /arrived with digest/);
    assert.ok(!store.blobs.has(img.layers[0]));
    assert.deepEqual(readdirSync(join(store.dir, 'roots')), []);
  });

  it('layers with ../, absolute names or writes through a symlink are refused; nothing lands outside', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'berth-outside-'));
    dirs.push(outside);
    const cases: Array<[string, Parameters<typeof tarOf>[0], RegExp]> = [
      ['dotdot', [{ name: '../../../../../../tmp/evil', body: 'x' }], /leaves the image/],
      ['absolute', [{ name: '/etc/evil', body: 'x' }], /absolute path/],
      [
        'symlink',
        [
          { name: 'esc', type: 'symlink', linkname: outside },
          { name: 'esc/evil', body: 'x' },
        ],
        /goes through the symlink/,
      ],
      ['hardlink', [{ name: 'h', type: 'link', linkname: '../../etc/passwd' }], /leaves the image/],
    ];
    for (const [name, entries, re] of cases) {
      const img = await push.image(`test/evil-${name}`, 'v1', [await tarOf(entries)]);
      await rejectsWith(newStore().pull(img.reference), 'UNSAFE_LAYER', re);
    }
    assert.deepEqual(readdirSync(outside), []);
  });

  it('a layer expanding past the cap is refused', async () => {
    const img = await push.image('test/bomb', 'v1', [
      await tarOf([{ name: 'zeros', body: Buffer.alloc(4 << 20) }]),
    ]);
    await rejectsWith(newStore({ maxLayerBytes: 1 << 20 }).pull(img.reference), 'TOO_LARGE', /expands past/);
  });

  it('an index resolves to the host architecture; an image for another one is refused', async () => {
    const amd = await push.image(
      'test/multi',
      'amd64',
      [await tarOf([{ name: 'arch', body: 'amd64' }])],
      {},
      'amd64',
    );
    const arm = await push.image(
      'test/multi',
      'arm64',
      [await tarOf([{ name: 'arch', body: 'arm64' }])],
      {},
      'arm64',
    );
    await push.index('test/multi', 'latest', [
      { digest: arm.digest, arch: 'arm64' },
      { digest: amd.digest, arch: 'amd64' },
    ]);
    const got = await newStore({ architecture: 'amd64' }).pull(`${reg.host}/test/multi`);
    assert.equal(readFileSync(join(got.rootfs, 'arch'), 'utf8'), 'amd64');
    await push.index('test/multi', 'arm-only', [{ digest: arm.digest, arch: 'arm64' }]);
    await rejectsWith(
      newStore({ architecture: 'amd64' }).pull(`${reg.host}/test/multi:arm-only`),
      'ARCHITECTURE',
      /no linux\/amd64.*linux\/arm64/,
    );
    await rejectsWith(
      newStore({ architecture: 'amd64' }).pull(arm.reference),
      'ARCHITECTURE',
      /is for linux\/arm64/,
    );
  });

  it('concurrent pulls of one name share one pull', async () => {
    const img = await push.image('test/shared', 'v1', [await busyboxLayer()]);
    const store = newStore();
    let downloads = 0;
    const write = store.blobs.write.bind(store.blobs);
    store.blobs.write = (...args) => {
      downloads++;
      return write(...args);
    };
    const [a, b] = await Promise.all([
      store.pull(img.reference),
      store.pull(img.reference.replace(':v1', ':v1')),
    ]);
    assert.equal(a.rootfs, b.rootfs);
    assert.equal(downloads, 2, 'the config and the one layer, each downloaded once');
  });

  it('releasing an image in use is refused; once no workspace holds it, its root and blobs go', async () => {
    const img = await push.image('test/rm', 'v1', [await tarOf([{ name: 'f', body: 'x' }])]);
    const store = newStore();
    const got = await store.pull(img.reference, 'ws-a');
    await store.pull(img.reference, 'ws-b');
    assert.deepEqual(
      store.heldBy('ws-a').map((i) => i.id),
      [img.configDigest],
    );
    assert.deepEqual(store.heldBy('ws-c'), []);
    // What workloads may build on: a name the workspace holds, never one only another workspace holds.
    assert.equal(store.findHeld(img.reference, 'ws-a')?.id, img.configDigest);
    assert.equal(store.findHeld(img.reference, 'ws-c'), undefined);
    assert.throws(() => store.release(img.reference, 'ws-a', () => true), /in use/);
    store.release(img.reference, 'ws-a', () => false);
    assert.ok(existsSync(got.rootfs), 'another workspace still holds it');
    assert.deepEqual(store.find(img.reference)?.references, [img.reference]);
    assert.deepEqual(store.heldBy('ws-a'), []);
    assert.equal(store.findHeld(img.reference, 'ws-a'), undefined, 'released: no longer usable by ws-a');
    store.release(img.reference, 'ws-b', () => false);
    assert.ok(!existsSync(got.rootfs));
    assert.ok(!store.blobs.has(img.layers[0]));
    assert.equal(store.find(img.reference), undefined);
  });
});

describe('image store with a registry behind basic auth', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await startRegistry({ username: 'alice', password: 's3cret' });
  });
  after(async () => {
    await reg.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('needs credentials, refuses wrong ones, pulls with the right ones', async () => {
    const img = await new Pusher(reg).image('private/app', 'v1', [await tarOf([{ name: 'f', body: 'x' }])]);
    await rejectsWith(newStore().pull(img.reference), 'UNAUTHORIZED', /needs credentials/);
    const wrong = newStore({ credentials: { [reg.host]: { username: 'alice', password: 'nope' } } });
    await rejectsWith(wrong.pull(img.reference), 'UNAUTHORIZED', /refused the credentials/);
    await assert.rejects(wrong.pull(img.reference), (e: Error) => !e.message.includes('nope'));
    const right = newStore({ credentials: { [reg.host]: { username: 'alice', password: 's3cret' } } });
    assert.equal((await right.pull(img.reference)).id, img.configDigest);
  });
});

describe('image store with a registry behind a token service', () => {
  it('answers the Bearer challenge with a token got with the credentials; refuses without them', async () => {
    const reg = await startRegistry();
    const front = await startTokenFront(reg, { username: 'bob', password: 'tok3n' });
    try {
      const img = await new Pusher(reg).image('tokened/app', 'v1', [await tarOf([{ name: 'f', body: 'x' }])]);
      const ref = `${front.host}/tokened/app:v1`;
      await rejectsWith(newStore().pull(ref), 'UNAUTHORIZED', /token service .* refused anonymous access/);
      const store = newStore({ credentials: { [front.host]: { username: 'bob', password: 'tok3n' } } });
      assert.equal((await store.pull(ref)).id, img.configDigest);
      assert.ok(front.tokensIssued() >= 1);
    } finally {
      await front.stop();
      await reg.stop();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  });
});
