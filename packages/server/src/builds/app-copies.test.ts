// A node copying a built app from a node that holds it (app-copies.ts, decision 094), over real HTTP between two data
// dirs: the copy is the holder's bytes (same archive digest), written with its plan and log, and Builder.build returns
// it without building; the peer routes answer 404 without the cluster token and for another workspace's app; a copy
// whose bytes are not the recorded digest leaves nothing and is asked again, works once the holder's bytes are right,
// and after MAX_FAILED_ROUNDS rounds gives way to a build here; no holder (or none with the revision's digest): build.
// An app built from a Dockerfile is copied as its image through the image routes (real image stores), checked
// against its id.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { Readable } from 'node:stream';
import { PEER_TOKEN_HEADER, peerToken } from '../crypto/peer-token.js';
import { importArchive } from '../runtime/images/archive.js';
import { ImageStore } from '../runtime/images/image-store.js';
import { PeerImages } from '../runtime/images/peer-images.js';
import { savedArchive, tarOf } from '../runtime/images/test-support/registry.js';
import { AppCopyError, appArchiveDigest } from './app-archive.js';
import { AppCopies, MAX_FAILED_ROUNDS } from './app-copies.js';
import { Builder } from './builder.js';
import { builtImageName } from './dockerfile/workload.js';
import { appsDirOf } from './layout.js';

const SOURCE = `sha256:${'ab'.repeat(32)}`;

/** A builder of `dataDir` that can only copy or find an app (no runtime, code or network: a build would throw). */
const builderAt = (dataDir: string) =>
  new Builder({
    dataDir,
    instances: undefined as never,
    code: undefined as never,
    outbound: undefined as never,
  });
const never = new AbortController().signal;

describe('built apps copied between the nodes of a cluster', () => {
  const token = peerToken(randomBytes(32));
  let dir: string;
  let holder: Builder;
  let app: FastifyInstance;
  let url: string;
  let key: string;
  let digest: string;
  let n = 0;
  /** A node lacking the app: its builder, and its copies asking the holder (or `peers`). */
  const node = (peers = () => [new URL(url)], t = token) => {
    const dataDir = join(dir, `node-${n++}`);
    const builder = builderAt(dataDir);
    const copies = new AppCopies({ dataDir, builder, token: t, peers: async () => peers() });
    const counts = { copied: 0, refused: 0 };
    copies.counted = (o) => counts[o]++;
    return { dataDir, builder, copies, counts };
  };
  const holderApp = () => join(appsDirOf(join(dir, 'holder'), 'ws-a'), key);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-app-copies-'));
    const dataDir = join(dir, 'holder');
    holder = builderAt(dataDir);
    key = holder.keyOf('ws-a', SOURCE);
    // An app as a build leaves it: its directory, its plan with the archive digest, its log.
    const apps = appsDirOf(dataDir, 'ws-a');
    mkdirSync(join(apps, key, 'lib'), { recursive: true });
    writeFileSync(join(apps, key, 'main.py'), 'print("hello")\n');
    writeFileSync(join(apps, key, 'lib/big.bin'), randomBytes(200_000));
    digest = (await appArchiveDigest(join(apps, key))).digest;
    writeFileSync(
      join(apps, `${key}.json`),
      JSON.stringify({ language: 'python', start: 'python main.py', archive: digest }),
    );
    mkdirSync(join(dataDir, 'builds/workspaces/ws-a/logs'), { recursive: true });
    writeFileSync(holder.logPath('ws-a', key), 'berth: unpacking\nberth: built\n');
    app = Fastify();
    new AppCopies({ dataDir, builder: holder, token, peers: async () => [] }).register(app);
    url = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("copies a workspace's app from its holder: the same bytes, its plan and log; Builder.build builds nothing", async () => {
    const { builder, copies, counts } = node();
    builder.copyFrom(copies);
    // No instances, no source here: a build would throw; the copy is what answers.
    const got = await builder.build(
      'ws-a',
      SOURCE,
      never,
      undefined,
      { kind: 'Agent', name: 'a' },
      { digest },
    );
    assert.equal(got.key, key);
    assert.equal(got.archive, digest);
    assert.match(String(got.copiedFrom), /^127\.0\.0\.1:\d+$/);
    assert.equal(got.plan.start, 'python main.py');
    assert.equal(readFileSync(join(got.dir, 'main.py'), 'utf8'), 'print("hello")\n');
    assert.equal((await appArchiveDigest(got.dir)).digest, digest);
    const again = builder.builtByKey('ws-a', key);
    assert.equal(again?.archive, digest);
    assert.equal(again?.dir, got.dir);
    const log = builder.readLog('ws-a', key) ?? '';
    assert.match(
      log,
      /^berth: unpacking\nberth: built\nberth: copied from 127\.0\.0\.1:\d+ \(archive sha256:[0-9a-f]{64}, \d+ bytes, \d+ ms\): not built here\n$/,
    );
    assert.deepEqual(counts, { copied: 1, refused: 0 });
    // Not into another workspace.
    assert.equal(builder.builtByKey('ws-b', key), undefined);
  });

  it("answers 404 without the cluster's token and for another workspace's app; another workspace copies nothing", async () => {
    const path = `/peer/apps/ws-a/${key}`;
    const ok = await fetch(`${url}${path}`, { headers: { [PEER_TOKEN_HEADER]: token } });
    assert.equal(ok.status, 200);
    assert.equal((await ok.json()).archive, digest);
    const tries: [string, Record<string, string>][] = [
      [path, {}],
      [`${path}/archive`, {}],
      [path, { [PEER_TOKEN_HEADER]: peerToken(randomBytes(32)) }],
      [`${path}/archive`, { authorization: `Bearer ${token}` }],
      [`/peer/apps/ws-b/${key}`, { [PEER_TOKEN_HEADER]: token }],
      [`/peer/apps/ws-b/${key}/archive`, { [PEER_TOKEN_HEADER]: token }],
      [`/peer/apps/ws-a/${'0'.repeat(32)}`, { [PEER_TOKEN_HEADER]: token }],
      ['/peer/apps/ws-a/..%2f..', { [PEER_TOKEN_HEADER]: token }],
      ['/peer/apps/..%2fholder/' + key, { [PEER_TOKEN_HEADER]: token }],
    ];
    for (const [p, headers] of tries) {
      const r = await fetch(`${url}${p}`, { headers });
      assert.equal(r.status, 404, `${p} ${JSON.stringify(headers)}: ${r.status}`);
      await r.body?.cancel();
    }
    const other = node();
    assert.equal(await other.copies.copy('ws-b', key, {}, never), undefined);
    assert.equal(existsSync(appsDirOf(other.dataDir, 'ws-b')), false);
    // With another cluster's token nothing is held either: built here.
    const stranger = node(undefined, peerToken(randomBytes(32)));
    assert.equal(await stranger.copies.copy('ws-a', key, {}, never), undefined);
  });

  it('builds here when no live node holds it, or none holds the bytes the revision recorded', async () => {
    assert.equal(await node(() => []).copies.copy('ws-a', key, {}, never), undefined);
    assert.equal(
      await node().copies.copy('ws-a', key, { digest: `sha256:${'0'.repeat(64)}` }, never),
      undefined,
    );
    // A holder that is down is no holder.
    assert.equal(
      await node(() => [new URL('http://127.0.0.1:9')]).copies.copy('ws-a', key, {}, never),
      undefined,
    );
  });

  it('builds here at once when the only holder went away during the copy', async () => {
    const description = await (
      await fetch(`${url}/peer/apps/ws-a/${key}`, { headers: { [PEER_TOKEN_HEADER]: token } })
    ).text();
    // A holder that dies in the middle of the archive (killed): half of it, then nothing answers any more.
    const dying = createServer((req, res) => {
      if (!req.url?.endsWith('/archive')) return void res.writeHead(200).end(description);
      res.writeHead(200);
      res.write(Buffer.alloc(64 * 1024, 1), () => {
        dying.close();
        dying.closeAllConnections();
      });
    });
    await new Promise<void>((r) => dying.listen(0, '127.0.0.1', r));
    const at = new URL(`http://127.0.0.1:${(dying.address() as AddressInfo).port}`);
    const { dataDir, copies, counts } = node(() => [at]);
    assert.equal(await copies.copy('ws-a', key, { digest }, never), undefined);
    assert.deepEqual(counts, { copied: 0, refused: 1 });
    assert.deepEqual(readdirSync(appsDirOf(dataDir, 'ws-a')), [], 'nothing of the cut copy left');
  });

  it('refuses a copy whose bytes rotted on the holder, leaving nothing; copies once they are right; builds after the rounds', async () => {
    const file = join(holderApp(), 'main.py');
    const good = readFileSync(file);
    appendFileSync(file, '# rot\n');
    try {
      const { dataDir, copies, counts } = node();
      await assert.rejects(copies.copy('ws-a', key, { digest }, never), (e) => {
        assert.ok(e instanceof AppCopyError);
        assert.match(
          e.message,
          /no node holding it gave it whole \(.*arrived with digest sha256:[0-9a-f]+, not sha256:/,
        );
        return true;
      });
      assert.deepEqual(counts, { copied: 0, refused: 1 });
      const apps = appsDirOf(dataDir, 'ws-a');
      assert.deepEqual(readdirSync(apps), [], 'no app, plan or partial file left');
      writeFileSync(file, good);
      const got = await copies.copy('ws-a', key, { digest }, never);
      assert.equal(got?.archive, digest);
      assert.equal((await appArchiveDigest(join(apps, key))).digest, digest);

      appendFileSync(file, '# rot\n');
      const stuck = node();
      for (let i = 0; i < MAX_FAILED_ROUNDS; i++)
        await assert.rejects(stuck.copies.copy('ws-a', key, { digest }, never), AppCopyError);
      // The holder's copy stays wrong: this node builds it itself rather than never running the revision.
      assert.equal(await stuck.copies.copy('ws-a', key, { digest }, never), undefined);
    } finally {
      writeFileSync(file, good);
    }
  });

  it('copies an app built from a Dockerfile as its image, checked against its id, in the same workspace only', async () => {
    // A holder as a Dockerfile build leaves it: the image under `berth-builds/app:<key>` in the workspace, the app's
    // plan naming the image (its id is the recorded digest), an empty app directory, its log.
    const source = `sha256:${'cd'.repeat(32)}`;
    const holderDir = join(dir, 'df-holder');
    const images = new ImageStore({ dataDir: holderDir });
    const built = builderAt(holderDir);
    const dfKey = built.keyOf('ws-a', source);
    const { archive, id } = await savedArchive(
      [await tarOf([{ name: 'app/run.sh', body: 'echo built once\n' }])],
      [builtImageName(dfKey)],
      { Cmd: ['/bin/sh', '/app/run.sh'] },
    );
    await importArchive(images, 'ws-a', Readable.from([archive]));
    const apps = appsDirOf(holderDir, 'ws-a');
    mkdirSync(join(apps, dfKey), { recursive: true });
    const base = { name: `docker.io/${builtImageName(dfKey)}`, id };
    writeFileSync(
      join(apps, `${dfKey}.json`),
      JSON.stringify({ language: 'dockerfile', start: '/bin/sh /app/run.sh', base, archive: id }),
    );
    mkdirSync(join(holderDir, 'builds/workspaces/ws-a/logs'), { recursive: true });
    writeFileSync(built.logPath('ws-a', dfKey), 'berth: building the Dockerfile at the root of the upload\n');
    const appImages = (store: ImageStore, peerImages: PeerImages) => ({
      holds: (ws: string, i: string) => store.find(ws, i)?.id === i,
      copy: async (ws: string, i: string, name: string, peer: URL) =>
        peerImages.copyAhead(ws, i, [ImageStore.parse(name).canonical], [peer]),
    });
    const holderImages = new PeerImages({ images, token, holder: () => ({ here: true }) });
    const server = Fastify();
    new AppCopies({
      dataDir: holderDir,
      builder: built,
      token,
      peers: async () => [],
      images: appImages(images, holderImages),
    }).register(server);
    holderImages.register(server);
    const at = new URL(await server.listen({ host: '127.0.0.1', port: 0 }));
    try {
      const dataDir = join(dir, 'df-copier');
      const mine = new ImageStore({ dataDir });
      const builder = builderAt(dataDir);
      const copies = new AppCopies({
        dataDir,
        builder,
        token,
        peers: async () => [at],
        images: appImages(mine, new PeerImages({ images: mine, token, holder: () => ({ peer: at }) })),
      });
      builder.copyFrom(copies);
      // No instances, no source, no image store for a build here: only the copy can answer.
      const got = await builder.build(
        'ws-a',
        source,
        never,
        undefined,
        { kind: 'Agent', name: 'df' },
        { digest: id },
      );
      assert.equal(got.plan.language, 'dockerfile');
      assert.equal(got.archive, id);
      assert.equal(got.base?.id, id);
      assert.equal(got.dir, '');
      assert.equal(
        mine.find('ws-a', builtImageName(dfKey))?.id,
        id,
        'its image, under its name, in its workspace',
      );
      assert.equal(builder.builtByKey('ws-a', dfKey)?.base?.id, id, 'marked built here');
      assert.match(
        builder.readLog('ws-a', dfKey) ?? '',
        /berth: copied from 127\.0\.0\.1:\d+ \(image sha256:[0-9a-f]{64}, \d+ ms\): not built here\n$/,
      );
      // Another workspace: the holder has no such app there, and nothing of the image lands in it.
      assert.equal(await copies.copy('ws-b', dfKey, {}, never), undefined);
      assert.equal(mine.find('ws-b', id), undefined);
      // A holder whose plan names an image it does not hold gives nothing (build here).
      const gone = built.keyOf('ws-a', `sha256:${'ef'.repeat(32)}`);
      mkdirSync(join(apps, gone), { recursive: true });
      writeFileSync(
        join(apps, `${gone}.json`),
        JSON.stringify({
          language: 'dockerfile',
          start: 'x',
          base: { name: 'x', id: `sha256:${'0'.repeat(64)}` },
          archive: `sha256:${'0'.repeat(64)}`,
        }),
      );
      assert.equal(await copies.copy('ws-a', gone, {}, never), undefined);
      // The archive route never gives a Dockerfile app: its image travels by the image routes.
      const r = await fetch(new URL(`/peer/apps/ws-a/${dfKey}/archive`, at), {
        headers: { [PEER_TOKEN_HEADER]: token },
      });
      assert.equal(r.status, 404);
    } finally {
      await server.close();
    }
  });
});
