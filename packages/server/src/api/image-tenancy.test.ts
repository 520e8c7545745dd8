// Image names belong to one workspace (docs/decisions/037-image-names-per-workspace.md), attacked through /v0/images
// by two tenants each acting with its own key, against a real server and a real loopback registry (no sandbox is
// started here: test/sandboxes/image-tenancy.test.ts runs sandboxes, test/agents/custom-image.test.ts agents).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import {
  busyboxLayer,
  Pusher,
  savedArchive,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../runtime/images/test-support/registry.js';
import { newTenant, type Tenant } from '../test-support/tenants.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../test-support/server.js';

/** One file saying whose image it is: a layer per tenant, so each image's content tells who made it. */
const ownLayer = (who: string) =>
  tarOf([
    { name: 'srv/', type: 'directory' },
    { name: 'srv/who', body: who },
  ]);

async function importAs(s: TestServer, t: Tenant, archive: Buffer, name?: string): Promise<Response> {
  return s.api(`/images/import${name ? `?name=${encodeURIComponent(name)}` : ''}`, {
    method: 'POST',
    body: new Uint8Array(archive),
    headers: { 'content-type': 'application/x-tar' },
    key: t.key,
  });
}

const ok = async (r: Response) => {
  const body = await r.json();
  assert.ok(r.ok, `${r.status} ${JSON.stringify(body)}`);
  return body;
};

describe('image names per workspace, two tenants', () => {
  let s: TestServer;
  let reg: TestRegistry;
  let a: Tenant;
  let b: Tenant;
  let pulledRef: string;
  let pulledId: string;
  before(async () => {
    [s, reg] = await Promise.all([startTestServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
    a = await newTenant(s, 'tenant-a');
    b = await newTenant(s, 'tenant-b');
    const img = await new Pusher(reg).image('team/app', 'v1', [
      await busyboxLayer(),
      await ownLayer('registry'),
    ]);
    pulledRef = img.reference;
    pulledId = img.configDigest;
  });
  after(async () => {
    await s.close();
    await reg.stop();
  });

  it("another tenant's import under A's names (local, and a registry's) changes nothing A sees or resolves", async () => {
    // A: the registry's image by pulling it, its own archive under a local name.
    assert.equal(
      (await ok(await s.api('/images', { method: 'POST', json: { reference: pulledRef }, key: a.key }))).id,
      pulledId,
    );
    const mine = await savedArchive([await busyboxLayer(), await ownLayer('tenant a')], ['local/app:1']);
    await ok(await importAs(s, a, mine.archive));
    // B: its own content under both of A's names (the registry's name as an import: never a pull from it).
    const theirs = await savedArchive([await busyboxLayer(), await ownLayer('tenant b')], []);
    await ok(await importAs(s, b, theirs.archive, 'local/app:1'));
    await ok(await importAs(s, b, theirs.archive, pulledRef));

    const get = async (t: Tenant, name: string) => ok(await s.api(`/images/${name}`, { key: t.key }));
    assert.equal((await get(a, 'local/app:1')).id, mine.id, "A's local name is still A's import");
    assert.equal((await get(a, pulledRef)).id, pulledId, "A's registry name is still what A pulled");
    assert.equal((await get(b, 'local/app:1')).id, theirs.id, "B's own import, for B");
    assert.equal((await get(b, pulledRef)).id, theirs.id);
    // A third tenant naming the registry's name gets the registry's image, never B's import of that name.
    const c = await newTenant(s, 'tenant-c');
    const pulledByC = await ok(
      await s.api('/images', { method: 'POST', json: { reference: pulledRef }, key: c.key }),
    );
    assert.equal(pulledByC.id, pulledId);
  });

  it("a workspace sees only its own names of an image; another's image by id is a 404", async () => {
    // Same content (same id) under different names in A and B.
    const shared = await savedArchive([await ownLayer('shared')], []);
    const inA = await ok(await importAs(s, a, shared.archive, 'a/shared:1'));
    const inB = await ok(await importAs(s, b, shared.archive, 'b/shared:1'));
    assert.equal(inA[0].id, inB[0].id, 'one image, content-addressed');
    assert.deepEqual(inA[0].references, ['docker.io/a/shared:1']);
    assert.deepEqual(inB[0].references, ['docker.io/b/shared:1'], "B's view names none of A's names");
    const listA = await ok(await s.api('/images', { key: a.key }));
    const names = listA.flatMap((i: { references: string[] }) => i.references);
    assert.ok(!names.some((n: string) => n.includes('/b/')), `A sees only its names: ${names}`);
    assert.deepEqual((await ok(await s.api(`/images/${shared.id}`, { key: b.key }))).references, [
      'docker.io/b/shared:1',
    ]);
    // A's own image by id, asked by B: not found (as if it did not exist).
    const mine = await savedArchive([await ownLayer('a only')], []);
    const aOnly = (await ok(await importAs(s, a, mine.archive, 'a/only:1')))[0];
    assert.equal((await s.api(`/images/${aOnly.id}`, { key: b.key })).status, 404);
    assert.equal((await s.api(`/images/${aOnly.id}`, { method: 'DELETE', key: b.key })).status, 404);
    assert.equal((await s.api(`/images/${aOnly.id}`, { key: a.key })).status, 200);
    // B letting go of its name leaves A's name of the same image alone.
    assert.equal((await s.api('/images/b/shared:1', { method: 'DELETE', key: b.key })).status, 200);
    assert.equal((await s.api('/images/a/shared:1', { key: a.key })).status, 200);
  });

  it('a deleted workspace recreated under its name holds nothing of the old one', async () => {
    const ws = { 'x-service-workspace': 'short-lived' };
    await ok(await s.api('/workspaces', { method: 'POST', json: { name: 'short-lived' } }));
    const img = await savedArchive([await ownLayer('old workspace')], ['old/image:1']);
    await ok(
      await s.api('/images/import', {
        method: 'POST',
        body: new Uint8Array(img.archive),
        headers: { 'content-type': 'application/x-tar', ...ws },
      }),
    );
    assert.equal((await ok(await s.api('/images', { headers: ws }))).length, 1);
    await ok(await s.api('/workspaces/short-lived', { method: 'DELETE' }));
    await ok(await s.api('/workspaces', { method: 'POST', json: { name: 'short-lived' } }));
    assert.deepEqual(await ok(await s.api('/images', { headers: ws })), []);
    assert.equal((await s.api('/images/old/image:1', { headers: ws })).status, 404);
    assert.equal((await s.api(`/images/${img.id}`, { headers: ws })).status, 404);
    assert.ok(
      !existsSync(join(s.dataDir, 'images/oci/roots', img.id.slice(7))),
      'an image no workspace holds any more is removed',
    );
  });

  it('a layer whose whiteout names .. is refused and nothing beside the image root is touched', async () => {
    const roots = join(s.dataDir, 'images/oci/roots');
    const sentinel = join(roots, 'sentinel');
    writeFileSync(sentinel, 'beside the roots');
    const before = readdirSync(roots).sort();
    assert.ok(before.length > 1, 'other images are unpacked beside it');
    const cases: Array<[string, Buffer]> = [
      ['.wh... at the top', await tarOf([{ name: '.wh...' }])],
      ['.wh... in a directory', await tarOf([{ name: 'a/', type: 'directory' }, { name: 'a/.wh...' }])],
      ['.wh.. (the directory itself)', await tarOf([{ name: 'a/', type: 'directory' }, { name: 'a/.wh..' }])],
      ['.wh. (no name)', await tarOf([{ name: '.wh.' }])],
    ];
    for (const [what, layer] of cases) {
      const evil = await savedArchive([await ownLayer('evil'), layer], []);
      const r = await importAs(s, b, evil.archive, 'evil/whiteout:1');
      const body = await r.json();
      assert.equal(r.status, 422, `${what}: ${JSON.stringify(body)}`);
      assert.equal(body.error, 'IMAGE_UNSAFE_LAYER', what);
      assert.match(body.detail, /leaves the image/, what);
      assert.equal(readFileSync(sentinel, 'utf8'), 'beside the roots', what);
      assert.deepEqual(readdirSync(roots).sort(), before, `${what}: every other root intact, nothing left`);
    }
  });
});

describe('image bytes per workspace (BERTH_QUOTA_IMAGE_MB)', () => {
  let s: TestServer;
  let a: Tenant;
  before(async () => {
    s = await startTestServer({ ...OUTBOUND_LOOPBACK, BERTH_QUOTA_IMAGE_MB: '2' });
    a = await newTenant(s, 'tenant-q');
  });
  after(async () => {
    await s.close();
  });

  it('a small layer expanding past the quota is refused with 429 before it is written, and nothing stays', async () => {
    const bomb = await tarOf([{ name: 'zeros', body: Buffer.alloc(8 << 20) }]);
    assert.ok(gzipSync(bomb).length < 64 << 10, 'a few KB on the wire');
    const img = await savedArchive([bomb], ['local/bomb:1']);
    const r = await importAs(s, a, img.archive);
    const body = await r.json();
    assert.equal(r.status, 429, JSON.stringify(body));
    assert.equal(body.error, 'QUOTA_EXCEEDED');
    assert.match(body.detail, /BERTH_QUOTA_IMAGE_MB/);
    assert.match(body.detail, /workspace tenant-q's image quota is 2\.0 MB/);
    const oci = join(s.dataDir, 'images/oci');
    assert.deepEqual(readdirSync(join(oci, 'roots')), [], 'no root, whole or partial');
    assert.deepEqual(readdirSync(join(oci, 'images')), []);
    assert.deepEqual(readdirSync(join(oci, 'blobs/sha256')), [], 'no blob of the refused image');
    assert.deepEqual(await ok(await s.api('/images', { key: a.key })), []);
  });

  it('images count together: one that would pass what is left is refused, the others stay usable', async () => {
    const mb = (name: string) => tarOf([{ name, body: Buffer.alloc(900 << 10, name) }]);
    const first = await savedArchive([await mb('one')], ['local/one:1']);
    const second = await savedArchive([await mb('two')], ['local/two:1']);
    const third = await savedArchive([await mb('three')], ['local/three:1']);
    await ok(await importAs(s, a, first.archive));
    await ok(await importAs(s, a, second.archive));
    const r = await importAs(s, a, third.archive);
    assert.equal(r.status, 429, await r.text());
    const names = (await ok(await s.api('/images', { key: a.key }))).flatMap(
      (i: { references: string[] }) => i.references,
    );
    assert.deepEqual(names, ['docker.io/local/one:1', 'docker.io/local/two:1']);
    // The same image under another name costs nothing more.
    await ok(await importAs(s, a, first.archive, 'local/one-again:1'));
    // Letting go of one makes room.
    await ok(await s.api('/images/local/two:1', { method: 'DELETE', key: a.key }));
    await ok(await importAs(s, a, third.archive));
  });
});
