// The image store against a real registry (Debian's docker-registry on loopback) with images each test builds.
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Readable } from 'node:stream';
import { importArchive } from './archive.js';
import { Outbound } from '../../outbound/index.js';
import { ImageError } from './errors.js';
import { ImageStore } from './image-store.js';
import {
  blobFile,
  busyboxLayer,
  loopbackOutbound,
  Pusher,
  savedArchive,
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
const hexOf = (id: string) => id.slice('sha256:'.length);
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
    const got = await store.pull('ws', img.reference);
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
    assert.equal(mode, 0o700, 'setuid dropped; the mode kept (a sandbox sees root-owned files as its own)');
    assert.ok(lstatSync(join(r, 'bin/sh')).isSymbolicLink());
    const byDigest = await store.pull('ws', `${reg.host}/test/whiteouts@${img.digest}`);
    assert.equal(byDigest.rootfs, got.rootfs, 'one root per image, whatever the name');
    assert.equal(store.find('ws', `${reg.host}/test/whiteouts:v1`)?.id, img.configDigest);
    assert.deepEqual(store.find('ws', img.configDigest)?.references, [
      `${reg.host}/test/whiteouts:v1`,
      `${reg.host}/test/whiteouts@${img.digest}`,
    ]);
  });

  it('an unknown tag or repository fails with NOT_FOUND naming the image', async () => {
    const store = newStore();
    await rejectsWith(
      store.pull('ws', `${reg.host}/test/nothing:here`),
      'NOT_FOUND',
      /test\/nothing:here: not found/,
    );
  });

  it('an unreachable registry fails with UNREACHABLE', async () => {
    await rejectsWith(newStore().pull('ws', '127.0.0.1:1/x:y'), 'UNREACHABLE', /127\.0\.0\.1:1.*unreachable/);
  });

  it('a registry on loopback is refused without the setting, before anything is sent', async () => {
    const img = await push.image('test/closed', 'v1', [await tarOf([{ name: 'f', body: 'x' }])]);
    for (const outbound of [undefined, new Outbound({ allowCidrs: ['0.0.0.0/0', '::/0'] })])
      await rejectsWith(
        newStore({ outbound }).pull('ws', img.reference),
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
      await rejectsWith(
        newStore({ outbound: onlyFront }).pull('ws', ref),
        'REFUSED',
        /127\.0\.0\.2 is loopback/,
      );
      assert.equal(closedHits, 0);
      const got = await newStore({ outbound: new Outbound({ allowCidrs: ['127.0.0.0/8'] }) })
        .pull('ws', ref)
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
    await rejectsWith(store.pull('ws', img.reference), 'CORRUPT', /arrived with digest/);
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
      await rejectsWith(newStore().pull('ws', img.reference), 'UNSAFE_LAYER', re);
    }
    assert.deepEqual(readdirSync(outside), []);
  });

  it('a layer expanding past the cap is refused', async () => {
    const img = await push.image('test/bomb', 'v1', [
      await tarOf([{ name: 'zeros', body: Buffer.alloc(4 << 20) }]),
    ]);
    await rejectsWith(
      newStore({ maxLayerBytes: 1 << 20 }).pull('ws', img.reference),
      'TOO_LARGE',
      /expands past/,
    );
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
    const got = await newStore({ architecture: 'amd64' }).pull('ws', `${reg.host}/test/multi`);
    assert.equal(readFileSync(join(got.rootfs, 'arch'), 'utf8'), 'amd64');
    await push.index('test/multi', 'arm-only', [{ digest: arm.digest, arch: 'arm64' }]);
    await rejectsWith(
      newStore({ architecture: 'amd64' }).pull('ws', `${reg.host}/test/multi:arm-only`),
      'ARCHITECTURE',
      /no linux\/amd64.*linux\/arm64/,
    );
    await rejectsWith(
      newStore({ architecture: 'amd64' }).pull('ws', arm.reference),
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
      store.pull('ws', img.reference),
      store.pull('ws', img.reference.replace(':v1', ':v1')),
    ]);
    assert.equal(a.rootfs, b.rootfs);
    assert.equal(downloads, 2, 'the config and the one layer, each downloaded once');
  });

  it('releasing an image in use is refused; once no workspace holds it, its root and blobs go', async () => {
    const img = await push.image('test/rm', 'v1', [await tarOf([{ name: 'f', body: 'x' }])]);
    let used = new Set<string>();
    const store = newStore({ rootsInUse: (ws) => (ws === 'ws-a' ? used : new Set()) });
    const got = await store.pull('ws-a', img.reference);
    await store.pull('ws-b', img.reference);
    assert.deepEqual(
      store.heldBy('ws-a').map((i) => i.id),
      [img.configDigest],
    );
    assert.deepEqual(store.heldBy('ws-c'), []);
    // What workloads may build on: a name the workspace holds, never one only another workspace holds.
    assert.equal(store.find('ws-a', img.reference)?.id, img.configDigest);
    assert.equal(store.find('ws-c', img.reference), undefined);
    assert.equal(store.find('ws-c', img.configDigest), undefined, 'nor an id only another workspace holds');
    used = new Set([got.rootfs]);
    assert.throws(() => store.release('ws-a', img.reference), /in use/);
    store.release('ws-b', img.reference); // A's sandboxes are no reason to refuse B
    used = new Set();
    assert.ok(existsSync(got.rootfs), 'ws-a still holds it');
    store.release('ws-a', img.reference);
    assert.deepEqual(store.heldBy('ws-a'), []);
    assert.ok(!existsSync(got.rootfs));
    assert.ok(!store.blobs.has(img.layers[0]));
    assert.equal(store.get(img.configDigest), undefined);
  });
});

describe('image names per workspace', () => {
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

  const who = async (name: string) => tarOf([{ name: 'who', body: name }]);
  const importAs = async (store: ImageStore, ws: string, layer: Buffer, name: string) =>
    (await importArchive(store, ws, Readable.from([(await savedArchive([layer], [])).archive]), name))[0];

  it("a name resolves to the workspace's own pull or import, else to the registry's pull, never to another's import", async () => {
    const img = await push.image('test/names', 'v1', [await who('registry')]);
    const store = newStore();
    let downloads = 0;
    const write = store.blobs.write.bind(store.blobs);
    store.blobs.write = (...args) => {
      downloads++;
      return write(...args);
    };
    await store.pull('ws-a', img.reference);
    const fetched = downloads;
    const bImport = await importAs(store, 'ws-b', await who('tenant b'), img.reference);
    assert.equal((await store.resolve('ws-a', img.reference)).id, img.configDigest, "A's pull stays A's");
    assert.equal((await store.resolve('ws-b', img.reference)).id, bImport.id, "B's import is B's only");
    assert.equal(
      store.peek('ws-c', img.reference)?.id,
      img.configDigest,
      "what C's sandbox would get: the registry's",
    );
    assert.deepEqual(store.heldBy('ws-c'), [], 'peeking holds nothing');
    downloads = 0;
    const c = await store.resolve('ws-c', img.reference);
    assert.equal(c.id, img.configDigest);
    assert.equal(downloads, 0, "the registry's image is not pulled again");
    assert.deepEqual(c.references, [img.reference], 'C now holds the name its sandbox used');
    // An id resolves only among the workspace's own images.
    await rejectsWith(
      store.resolve('ws-b', img.configDigest),
      'NOT_FOUND',
      /not among this workspace's images/,
    );
    await rejectsWith(store.resolve('ws-a', bImport.id), 'NOT_FOUND', /not among this workspace's images/);
    assert.equal(store.get(bImport.id)?.id, bImport.id, 'the runtime finds content by id, names aside');
    // The tag moves: A's pull follows it (and the registry binding with it); C's name keeps what C had.
    const moved = await push.image('test/names', 'v1', [await who('registry, later')]);
    downloads = 0;
    assert.equal((await store.pull('ws-a', img.reference)).id, moved.configDigest);
    assert.ok(downloads > 0 && fetched > 0);
    assert.equal((await store.resolve('ws-c', img.reference)).id, img.configDigest);
    assert.equal((await store.resolve('ws-d', img.reference)).id, moved.configDigest);
  });

  it("a pull a workspace's sandbox makes counts against that workspace's quota", async () => {
    const img = await push.image('test/big', 'v1', [
      await tarOf([{ name: 'big', body: Buffer.alloc(3 << 20) }]),
    ]);
    const store = newStore({ quotaBytes: 2 << 20 });
    await rejectsWith(store.resolve('ws', img.reference), 'QUOTA_EXCEEDED', /ws's image quota is 2\.0 MB/);
    assert.deepEqual(readdirSync(join(store.dir, 'roots')), []);
    const roomy = newStore({ quotaBytes: 8 << 20 });
    await roomy.resolve('ws', img.reference);
    assert.ok(roomy.usage('ws').usedBytes >= 3 << 20);
    assert.equal(roomy.usage('ws').limitBytes, 8 << 20);
    assert.equal(roomy.usage('other').usedBytes, 0);
  });

  it('an image larger than what the disk has free is refused as it unpacks, and nothing of it stays', async () => {
    const img = await push.image('test/disk', 'v1', [
      await tarOf([{ name: 'big', body: Buffer.alloc(3 << 20) }]),
    ]);
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-images-'));
    dirs.push(dataDir);
    // A reserve that leaves 1 MiB of this disk to images: the quota (10 GB) is not what refuses it.
    const fs = statfsSync(dataDir);
    const store = newStore({ dataDir, diskReserveBytes: fs.bavail * fs.bsize - (1 << 20) });
    await rejectsWith(store.resolve('ws', img.reference), 'TOO_LARGE', /the disk has free/);
    assert.deepEqual(readdirSync(join(store.dir, 'roots')), []);
    assert.deepEqual(store.heldBy('ws'), []);
  });

  it('whiteouts are judged like any path: .wh... and names under a symlink are refused, nothing outside is touched', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'berth-outside-'));
    dirs.push(outside);
    writeFileSync(join(outside, 'victim'), 'still here');
    const store = newStore();
    const kept = await store.pull('ws', (await push.image('test/kept', 'v1', [await who('kept')])).reference);
    const sentinel = join(store.dir, 'roots', 'sentinel');
    writeFileSync(sentinel, 'beside the roots');
    const cases: Array<[string, Parameters<typeof tarOf>[0], RegExp]> = [
      ['wh-dotdot', [{ name: '.wh...' }], /leaves the image/],
      ['wh-dotdot-nested', [{ name: 'a/', type: 'directory' }, { name: 'a/.wh...' }], /leaves the image/],
      ['wh-dot', [{ name: 'a/', type: 'directory' }, { name: 'a/.wh..' }], /leaves the image/],
      ['wh-empty', [{ name: '.wh.' }], /leaves the image/],
      [
        'wh-symlinked-parent',
        [{ name: 'esc', type: 'symlink', linkname: outside }, { name: 'esc/.wh.victim' }],
        /goes through the symlink/,
      ],
      [
        'opaque-symlinked-parent',
        [{ name: 'esc', type: 'symlink', linkname: outside }, { name: 'esc/.wh..wh..opq' }],
        /goes through the symlink/,
      ],
      [
        'hardlink-symlinked-parent',
        [
          { name: 'esc', type: 'symlink', linkname: outside },
          { name: 'h', type: 'link', linkname: 'esc/victim' },
        ],
        /goes through the symlink/,
      ],
    ];
    for (const [name, entries, re] of cases) {
      const img = await push.image(`test/evil-${name}`, 'v1', [await who('base'), await tarOf(entries)]);
      await rejectsWith(store.pull('ws', img.reference), 'UNSAFE_LAYER', re);
    }
    assert.equal(readFileSync(sentinel, 'utf8'), 'beside the roots');
    assert.equal(readFileSync(join(outside, 'victim'), 'utf8'), 'still here');
    assert.equal(readFileSync(join(kept.rootfs, 'who'), 'utf8'), 'kept');
    assert.deepEqual(readdirSync(join(store.dir, 'roots')).sort(), [hexOf(kept.id), 'sentinel'].sort());
  });

  it('a data dir of the global name table is migrated: each listed workspace keeps its name, the registry pulls again', async () => {
    const img = await push.image('test/migrate', 'v1', [await who('old layout')]);
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-images-'));
    dirs.push(dataDir);
    const first = new ImageStore({ dataDir, outbound: loopbackOutbound() });
    const pulled = await first.pull('ws-a', img.reference);
    // Back to the layout before names were per workspace: one refs/<hash>.json per name, its workspaces listed,
    // and an image record carrying every name.
    const oci = join(dataDir, 'images/oci');
    rmSync(join(oci, 'names'), { recursive: true });
    rmSync(join(oci, 'registry'), { recursive: true });
    mkdirSync(join(oci, 'refs'));
    const id = hexOf(pulled.id);
    writeFileSync(
      join(oci, 'refs', 'd41d8cd98f00b204e9800998ecf8427e.json'),
      JSON.stringify({ reference: img.reference, id, workspaces: ['ws-a', 'ws-b'] }),
    );
    writeFileSync(
      join(oci, 'refs', '0cc175b9c0f1b6a831c399e269772661.json'),
      JSON.stringify({ reference: 'docker.io/gone/image:1', id: 'f'.repeat(64), workspaces: ['ws-a'] }),
    );
    const { unpackedBytes: _, ...old } = pulled;
    writeFileSync(join(oci, 'images', `${id}.json`), JSON.stringify({ ...old, references: [img.reference] }));

    const store = new ImageStore({ dataDir, outbound: loopbackOutbound() });
    assert.ok(!existsSync(join(oci, 'refs')), 'the old table is gone');
    for (const ws of ['ws-a', 'ws-b']) {
      const held = store.find(ws, img.reference);
      assert.equal(held?.id, pulled.id, ws);
      assert.deepEqual(held?.references, [img.reference]);
    }
    assert.equal(
      store.find('ws-a', 'docker.io/gone/image:1'),
      undefined,
      'a name of an image no longer stored',
    );
    assert.ok((store.get(pulled.id)?.unpackedBytes ?? 0) > 0, 'an old record is measured');
    assert.equal(store.peek('ws-c', img.reference), undefined, 'no registry binding: it cannot tell a pull');
    // The registry is asked again: its tag has moved since, and C gets what it names now; A keeps its own.
    const moved = await push.image('test/migrate', 'v1', [await who('new layout')]);
    assert.equal((await store.resolve('ws-c', img.reference)).id, moved.configDigest);
    assert.equal((await store.resolve('ws-a', img.reference)).id, pulled.id);
    assert.equal(
      store.peek('ws-d', img.reference)?.id,
      moved.configDigest,
      'that pull binds the registry name',
    );
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
    await rejectsWith(newStore().pull('ws', img.reference), 'UNAUTHORIZED', /needs credentials/);
    const wrong = newStore({ credentials: { [reg.host]: { username: 'alice', password: 'nope' } } });
    await rejectsWith(wrong.pull('ws', img.reference), 'UNAUTHORIZED', /refused the credentials/);
    await assert.rejects(wrong.pull('ws', img.reference), (e: Error) => !e.message.includes('nope'));
    const right = newStore({ credentials: { [reg.host]: { username: 'alice', password: 's3cret' } } });
    assert.equal((await right.pull('ws', img.reference)).id, img.configDigest);
  });
});

describe('image store with a registry behind a token service', () => {
  it('answers the Bearer challenge with a token got with the credentials; refuses without them', async () => {
    const reg = await startRegistry();
    const front = await startTokenFront(reg, { username: 'bob', password: 'tok3n' });
    try {
      const img = await new Pusher(reg).image('tokened/app', 'v1', [await tarOf([{ name: 'f', body: 'x' }])]);
      const ref = `${front.host}/tokened/app:v1`;
      await rejectsWith(
        newStore().pull('ws', ref),
        'UNAUTHORIZED',
        /token service .* refused anonymous access/,
      );
      const store = newStore({ credentials: { [front.host]: { username: 'bob', password: 'tok3n' } } });
      assert.equal((await store.pull('ws', ref)).id, img.configDigest);
      assert.ok(front.tokensIssued() >= 1);
    } finally {
      await front.stop();
      await reg.stop();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  });
});
