// Images ahead (images-ahead.ts, decision 087) between image stores over real HTTP, each pass driven by hand: a
// follower copies what the leader's catalog lists, into the same workspace; lets go of what the leader let go of
// (and remembers it); a leader adopts what only a follower holds, never a name it let go of; a node with the leader
// out of reach resolves a name in its own copy or at another holder; built apps' names are not copied. The
// three-server flow is test/cluster/images-ahead.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { peerToken } from '../../crypto/peer-token.js';
import { importArchive } from './archive.js';
import { ImageStore } from './image-store.js';
import { SqliteStore } from '../../store/sqlite.js';
import { goneRecordOf } from './gone-record.js';
import { ImagesAhead } from './images-ahead.js';
import { type ImageHolder, PeerImages } from './peer-images.js';
import { savedArchive, tarOf } from './test-support/registry.js';

interface Node {
  images: ImageStore;
  peer: PeerImages;
  url: URL;
  app: FastifyInstance;
  holder: ImageHolder;
}

describe('images ahead: every node holds what the leader holds', () => {
  const token = peerToken(randomBytes(32));
  let dir: string;
  const nodes: Node[] = [];
  /** A node whose holder is `leader()` (undefined: this one leads), serving the peer routes. */
  const node = async (leader: () => Node | undefined): Promise<Node> => {
    const images = new ImageStore({ dataDir: join(dir, `node-${nodes.length}`) });
    const holder: ImageHolder = () => {
      const l = leader();
      return l ? { peer: l.url } : { here: true };
    };
    const n = {
      images,
      holder,
      peer: new PeerImages({
        images,
        token,
        holder,
        peers: async () => nodes.filter((o) => o.images !== images).map((o) => o.url),
      }),
    } as Node;
    n.app = Fastify();
    n.peer.register(n.app);
    n.url = new URL(await n.app.listen({ host: '127.0.0.1', port: 0 }));
    nodes.push(n);
    return n;
  };
  const ahead = (n: Node) =>
    new ImagesAhead({
      images: n.images,
      peerImages: n.peer,
      token,
      holder: n.holder,
      peers: async () => nodes.filter((o) => o !== n).map((o) => o.url),
      workspaceExists: async () => true,
    });
  const imported = async (into: ImageStore, ws: string, name: string, body: string) => {
    const layer = await tarOf([{ name: 'hello', body }]);
    const { archive, id } = await savedArchive([layer], [name]);
    await importArchive(into, ws, Readable.from([archive]));
    return id;
  };

  let leader: Node;
  let follower: Node;
  let appId: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-images-ahead-'));
    leader = await node(() => undefined);
    follower = await node(() => leader);
    appId = await imported(leader.images, 'ws-a', 'local/app:1', 'from the leader');
  });
  after(async () => {
    for (const n of nodes) await n.app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("copies the leader's images into the same workspace, and not the built apps' names", async () => {
    const built = await imported(leader.images, 'ws-a', 'berth-builds/app:0123abcd', 'built by the leader');
    await ahead(follower).tick();
    assert.equal(follower.images.find('ws-a', 'local/app:1')?.id, appId);
    assert.equal(follower.images.find('ws-b', 'local/app:1'), undefined);
    assert.equal(follower.images.find('ws-a', 'berth-builds/app:0123abcd'), undefined);
    assert.equal(follower.images.get(built), undefined);
  });

  it('lets go of a name the leader let go of, and remembers it', async () => {
    // One archive, imported twice: a layer made again a second later has another mtime, so another id.
    const { archive, id: other } = await savedArchive(
      [await tarOf([{ name: 'hello', body: 'to be deleted' }])],
      ['local/gone:1'],
    );
    await importArchive(leader.images, 'ws-a', Readable.from([archive]));
    const a = ahead(follower);
    await a.tick();
    assert.equal(follower.images.find('ws-a', 'local/gone:1')?.id, other);
    leader.images.release('ws-a', 'local/gone:1');
    assert.ok(leader.images.isGone('ws-a', 'docker.io/local/gone:1', other.slice(7)));
    await a.tick();
    assert.equal(follower.images.find('ws-a', 'local/gone:1'), undefined);
    assert.equal(follower.images.get(other), undefined, 'its root and record collected');
    assert.ok(follower.images.isGone('ws-a', 'docker.io/local/gone:1', other.slice(7)));
    // Pushed again: no longer gone, copied again.
    await importArchive(leader.images, 'ws-a', Readable.from([archive]));
    assert.ok(!leader.images.isGone('ws-a', 'docker.io/local/gone:1', other.slice(7)));
    await a.tick();
    assert.equal(follower.images.find('ws-a', 'local/gone:1')?.id, other);
  });

  it('leading, adopts what only another node holds, never a name it let go of', async () => {
    // An image only the follower holds (it received it while it led, say), and one the leader let go of.
    const only = await imported(follower.images, 'ws-c', 'local/only-follower:1', 'one copy');
    const letGo = await imported(leader.images, 'ws-c', 'local/let-go:1', 'deleted on the leader');
    await imported(follower.images, 'ws-c', 'local/let-go:1', 'deleted on the leader');
    leader.images.release('ws-c', 'local/let-go:1');
    await ahead(leader).tick();
    assert.equal(leader.images.find('ws-c', 'local/only-follower:1')?.id, only);
    assert.equal(leader.images.find('ws-c', 'local/let-go:1'), undefined);
    assert.equal(leader.images.get(letGo), undefined);
  });

  it('leading, answers a write once a node that copies ahead holds it; a node that does not is not waited for', async () => {
    const onLeader = ahead(leader);
    const id = await imported(leader.images, 'ws-f', 'local/second:1', 'two copies');
    // The follower does not copy ahead (not started): nobody to wait for, one copy.
    assert.equal(await onLeader.secondCopy('ws-f', [id], 60_000), 1);
    const a = ahead(follower);
    a.start();
    try {
      assert.equal(await onLeader.secondCopy('ws-f', [id], 60_000), 2);
      assert.equal(follower.images.find('ws-f', 'local/second:1')?.id, id);
    } finally {
      a.close();
    }
    // Not leading: the write is not this node's to wait for.
    assert.equal(await a.secondCopy('ws-f', [id], 60_000), undefined);
  });

  it('leading, answers a delete once every node that copies ahead let go of its names', async () => {
    const onLeader = ahead(leader);
    const id = await imported(leader.images, 'ws-g', 'local/letgo:1', 'to be let go of');
    const a = ahead(follower);
    a.start();
    try {
      assert.equal(await onLeader.secondCopy('ws-g', [id, 'local/letgo:1'], 60_000), 2);
      leader.images.release('ws-g', 'local/letgo:1');
      assert.equal(await onLeader.letGo('ws-g', ['docker.io/local/letgo:1'], 60_000), 0);
      assert.equal(
        follower.images.find('ws-g', 'local/letgo:1'),
        undefined,
        'the follower let go when answered',
      );
    } finally {
      a.close();
    }
    // Not leading: not this node's delete to wait for.
    assert.equal(await a.letGo('ws-g', ['docker.io/local/letgo:1'], 60_000), undefined);
  });

  it('without a leader to ask, resolves in its own copy, else at another holder, in the same workspace only', async () => {
    const third = await node(() => undefined);
    const id = await imported(follower.images, 'ws-d', 'local/elsewhere:1', 'on the follower');
    const orphan = new PeerImages({
      images: third.images,
      token,
      holder: () => ({ unavailable: 'no server leads now' }),
      peers: async () => [follower.url],
    });
    assert.equal((await orphan.resolve('ws-d', 'local/elsewhere:1')).id, id);
    assert.equal(third.images.find('ws-d', 'local/elsewhere:1')?.id, id);
    // Another workspace naming it, by name or id: the leader's error, nothing copied there.
    for (const name of ['local/elsewhere:1', id])
      await assert.rejects(orphan.resolve('ws-e', name), /cannot be asked now/);
    assert.equal(third.images.find('ws-e', id), undefined);
  });

  it('taking the lead alone, lets go of what the record says was let go of while away; never of its own new writes', async () => {
    const db = new SqliteStore(join(dir, 'record.db'));
    const record = goneRecordOf(db, db);
    let leading: Node | undefined;
    const was = await node(() => (leading === was ? undefined : leading));
    const back = await node(() => (leading === back ? undefined : leading));
    // Nodes alone: nothing to copy or adopt from the others of this file.
    const aheadOf = (n: Node) =>
      new ImagesAhead({
        images: n.images,
        peerImages: n.peer,
        token,
        holder: n.holder,
        peers: async () => [],
        workspaceExists: async () => true,
        goneRecord: record,
      });
    const archive = async (name: string, body: string) =>
      savedArchive([await tarOf([{ name: 'hello', body }])], [name]);
    const both = async (ws: string, { archive: a }: { archive: Buffer }) => {
      for (const n of [was, back]) await importArchive(n.images, ws, Readable.from([a]));
    };
    try {
      // Both hold two images when `back` goes away; `was` leads and deletes them.
      const del = await archive('local/deleted:1', 'deleted while away');
      const again = await archive('local/again:1', 'deleted, then pushed again');
      await both('ws-r', del);
      await both('ws-s', again);
      leading = was;
      const onWas = aheadOf(was);
      await onWas.tick();
      was.images.release('ws-r', 'local/deleted:1');
      assert.equal(await onWas.letGo('ws-r', ['docker.io/local/deleted:1'], 0), undefined);
      was.images.release('ws-s', 'local/again:1');
      await onWas.letGo('ws-s', ['docker.io/local/again:1'], 0);
      assert.deepEqual(Object.keys(await record.read()).sort(), ['ws-r', 'ws-s'], 'recorded before answered');

      // `was` dies; `back` returns and leads, no other node up. Before its first pass, a user pushes the second
      // image again through it: that workspace is its own word now.
      leading = back;
      const onBack = aheadOf(back);
      await importArchive(back.images, 'ws-s', Readable.from([again.archive]));
      await onBack.secondCopy('ws-s', ['local/again:1'], 0);
      await onBack.tick();
      assert.equal(
        back.images.find('ws-r', 'local/deleted:1'),
        undefined,
        'the delete made while away holds',
      );
      assert.ok(back.images.isGone('ws-r', 'docker.io/local/deleted:1', del.id.slice(7)));
      assert.ok(back.images.find('ws-s', 'local/again:1'), 'its own later push stays');
      assert.deepEqual(Object.keys((await record.read())['ws-s'] ?? {}), [], 'and the record says so');
    } finally {
      db.close();
    }
  });
});
