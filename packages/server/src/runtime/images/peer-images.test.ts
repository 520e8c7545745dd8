// A node copying a workspace's image from the server holding it (peer-images.ts, decision 081), over real HTTP between
// two image stores: by name and by id, in its workspace only; the peer routes answer 404 without the cluster token
// and for any image or blob the named workspace does not hold; a blob whose bytes are not its digest leaves nothing
// installed, and the same copy works once the holder serves the right bytes; a holder that cannot be reached is an
// error naming the image. The three-server flow is test/cluster/images.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { PEER_TOKEN_HEADER, peerToken } from '../../crypto/peer-token.js';
import { importArchive } from './archive.js';
import { ImageError } from './errors.js';
import { ImageStore } from './image-store.js';
import { type ImageHolder, PeerImages } from './peer-images.js';
import { savedArchive, tarOf } from './test-support/registry.js';

describe('images copied between the servers of a cluster', () => {
  const token = peerToken(randomBytes(32));
  let dir: string;
  let held: ImageStore;
  let app: FastifyInstance;
  let url: string;
  let appId: string;
  let otherId: string;
  const nodes: ImageStore[] = [];
  const node = (holder: ImageHolder = () => ({ peer: new URL(url) }), t = token) => {
    const images = new ImageStore({ dataDir: join(dir, `node-${nodes.length}`) });
    nodes.push(images);
    return { images, peer: new PeerImages({ images, token: t, holder }) };
  };
  const imported = async (ws: string, name: string, files: Record<string, string>) => {
    const layer = await tarOf([
      { name: 'srv/', type: 'directory' },
      ...Object.entries(files).map(([n, body]) => ({ name: `srv/${n}`, body })),
    ]);
    const { archive: tar, id } = await savedArchive([layer], [name], { Env: ['FROM=holder'] });
    await importArchive(held, ws, Readable.from([tar]));
    return { id, layer };
  };
  const refusal = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e) => e,
    );
    assert.ok(err instanceof ImageError, String(err));
    return err;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-peer-images-'));
    held = new ImageStore({ dataDir: join(dir, 'holder') });
    appId = (await imported('ws-a', 'local/app:1', { hello: 'from the leader' })).id;
    otherId = (await imported('ws-b', 'local/other:1', { b: 'of workspace b' })).id;
    app = Fastify();
    new PeerImages({ images: held, token, holder: () => ({ here: true }) }).register(app);
    url = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("copies a workspace's image by name from the holder, into that workspace only", async () => {
    const { images, peer } = node();
    const img = await peer.resolve('ws-a', 'local/app:1');
    assert.equal(img.id, appId);
    assert.equal(readFileSync(join(img.rootfs, 'srv/hello'), 'utf8'), 'from the leader');
    assert.deepEqual(img.config.env, ['FROM=holder']);
    assert.equal(images.find('ws-a', 'local/app:1')?.id, appId);
    assert.equal(images.find('ws-b', 'local/app:1'), undefined);
    // Asked again (a second sandbox), and by id: the same image, nothing copied twice.
    assert.equal((await peer.resolve('ws-a', appId)).id, appId);
    assert.deepEqual(readdirSync(join(images.dir, 'roots')), [appId.slice(7)]);
  });

  it("refuses workspace B another workspace's image by id, and tells a node without the token nothing", async () => {
    const { images, peer } = node();
    const err = await refusal(peer.resolve('ws-b', appId));
    assert.equal(err.code, 'NOT_FOUND');
    assert.match(err.message, /is not among this workspace's images/);
    assert.equal(images.get(appId), undefined, 'nothing of it copied');
    assert.equal(await peer.holds('ws-b', appId), false);
    assert.equal(await peer.holds('ws-a', appId), true);
    // The routes themselves: 404 without the token, with another cluster's, and for what B does not hold.
    const get = (path: string, t?: string) =>
      fetch(`${url}${path}`, { headers: t ? { [PEER_TOKEN_HEADER]: t } : {} });
    const appLayer = held.get(appId)?.layers[0].digest as string;
    const otherLayer = held.get(otherId)?.layers[0].digest as string;
    const resolveA = `/peer/images/ws-a/resolve?name=local/app:1`;
    const blobA = `/peer/images/ws-a/${appId}/blobs/${appLayer}`;
    assert.equal((await get(resolveA, token)).status, 200);
    assert.equal((await get(blobA, token)).status, 200);
    for (const [path, t] of [
      [resolveA, undefined],
      [resolveA, peerToken(randomBytes(32))],
      [blobA, undefined],
      [blobA, peerToken(randomBytes(32))],
      [`/peer/images/ws-b/resolve?name=${appId}`, token],
      [`/peer/images/ws-b/resolve?name=local/app:1`, token],
      [`/peer/images/ws-b/${appId}/blobs/${appLayer}`, token],
      // B's own image, asking for a blob of A's: never served under B.
      [`/peer/images/ws-b/${otherId}/blobs/${appLayer}`, token],
      [`/peer/images/ws-a/${appId}/blobs/${otherLayer}`, token],
      [`/peer/images/ws-a/resolve?name=Not Valid`, token],
    ] as const) {
      const r = await get(path, t);
      assert.equal(r.status, 404, `${path} ${t ? 'with a token' : 'without'}`);
    }
    // A node of another cluster (another master key) copies nothing.
    const stranger = node(undefined, peerToken(randomBytes(32)));
    assert.equal((await refusal(stranger.peer.resolve('ws-a', appId))).code, 'NOT_FOUND');
  });

  it('installs nothing when a blob arrives with other bytes than its digest, and copies it once it is right', async () => {
    const { id, layer } = await imported('ws-a', 'local/broken:1', { x: 'right bytes' });
    const digest = held.get(id)?.layers[0].digest as string;
    const file = held.blobs.path(digest);
    const good = readFileSync(file);
    writeFileSync(file, Buffer.alloc(good.length, 1));
    const { images, peer } = node();
    const err = await refusal(peer.resolve('ws-a', 'local/broken:1'));
    assert.equal(err.code, 'CORRUPT');
    assert.match(err.message, /^image local\/broken:1: blob sha256:[a-f0-9]+ arrived with digest/);
    assert.equal(images.get(id), undefined);
    assert.equal(images.find('ws-a', 'local/broken:1'), undefined);
    assert.equal(images.blobs.has(digest), false);
    assert.deepEqual(
      readdirSync(images.blobs.dir).filter((n) => n.includes('.partial-')),
      [],
    );
    assert.deepEqual(readdirSync(join(images.dir, 'roots')), []);
    writeFileSync(file, good);
    const img = await peer.resolve('ws-a', 'local/broken:1');
    assert.equal(img.id, id);
    assert.equal(readFileSync(join(img.rootfs, 'srv/x'), 'utf8'), 'right bytes');
    assert.ok(layer.length > 0);
  });

  it('fails naming the image when the holder cannot be reached or there is none now', async () => {
    const closed = Fastify();
    const gone = await closed.listen({ host: '127.0.0.1', port: 0 });
    await closed.close();
    const { peer } = node(() => ({ peer: new URL(gone) }));
    const err = await refusal(peer.resolve('ws-a', 'local/app:1'));
    assert.equal(err.code, 'UNREACHABLE');
    assert.match(
      err.message,
      /^image local\/app:1: the server holding this workspace's images .* could not give it/,
    );
    const none = node(() => ({ unavailable: 'no server of the cluster holds instances now' }));
    const e2 = await refusal(none.peer.resolve('ws-a', 'local/app:1'));
    assert.match(e2.message, /^image local\/app:1: .*no server of the cluster holds instances now/);
    assert.ok(!existsSync(join(none.images.dir, 'roots', appId.slice(7))));
  });
});
