// Copies of uploaded sources between the servers of a cluster (code-copies.ts): a server copies a source the store
// names from a peer that has it, only with the cluster's token, and keeps a copy only if its bytes are the digest
// asked for. The three-server flow (a kill -9 of the leader survived thanks to them) is test/cluster/flows.test.ts.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { SqliteStore } from '../store/sqlite.js';
import { CodeCopies, PEER_TOKEN_HEADER, peerToken } from './code-copies.js';
import { CodeStore } from './code-store.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const digestOf = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('copies of uploaded sources between servers', () => {
  const token = peerToken(randomBytes(32));
  let dir: string;
  let store: SqliteStore;
  let holder: CodeStore;
  let app: FastifyInstance;
  let url: string;
  const started: CodeCopies[] = [];
  /** Requests the peer answered, by URL. */
  const asked = new Map<string, number>();
  /** Until the peer was asked for the source twice: a server asks again only once its first try is over. */
  const triedTwice = async (digest: string) => {
    const path = `/peer/code/default/${digest}`;
    for (let i = 0; i < 100 && (asked.get(path) ?? 0) < 2; i++) await sleep(100);
    assert.ok((asked.get(path) ?? 0) >= 2, `asked ${asked.get(path) ?? 0} times`);
  };
  const agent = (name: string, digest: string) =>
    store.write([
      {
        op: 'create',
        key: { kind: 'Agent', workspace: 'default', parent: '', name },
        body: { metadata: { name }, source: { digest } },
      },
    ]);
  const copier = (code: CodeStore, t = token) => {
    const c = new CodeCopies({ store, code, token: t, peers: async () => [url] });
    started.push(c);
    return c;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-code-copies-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    holder = new CodeStore(join(dir, 'holder'));
    app = Fastify();
    app.addHook('onResponse', async (req) => {
      asked.set(req.url, (asked.get(req.url) ?? 0) + 1);
    });
    new CodeCopies({ store, code: holder, token, peers: async () => [] }).register(app);
    url = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    for (const c of started) c.close();
    await app.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('copies a source the store names from the peer that has it, and a later one as the feed shows it', async () => {
    const first = await holder.put('default', Readable.from([Buffer.from('first zip')]));
    await agent('one', first.digest);
    const here = new CodeStore(join(dir, 'follower'));
    await copier(here).start();
    for (let i = 0; i < 50 && !here.has('default', first.digest); i++) await sleep(50);
    assert.ok(here.has('default', first.digest), 'copied at start');
    const second = await holder.put('default', Readable.from([Buffer.from('second zip')]));
    await agent('two', second.digest);
    for (let i = 0; i < 50 && !here.has('default', second.digest); i++) await sleep(50);
    assert.ok(here.has('default', second.digest), 'copied from the feed');
    assert.equal(here.has('other', second.digest), false, 'in its own workspace only');
  });

  it('gives nothing without the cluster token', async () => {
    const zip = await holder.put('default', Readable.from([Buffer.from('third zip')]));
    for (const headers of [{}, { [PEER_TOKEN_HEADER]: peerToken(randomBytes(32)) }] as Record<
      string,
      string
    >[]) {
      const r = await fetch(`${url}/peer/code/default/${zip.digest}`, { headers });
      assert.notEqual(r.status, 200, JSON.stringify(headers));
    }
    const stranger = new CodeStore(join(dir, 'stranger'));
    await agent('three', zip.digest);
    asked.clear();
    await copier(stranger, peerToken(randomBytes(32))).start();
    await triedTwice(zip.digest);
    assert.equal(stranger.has('default', zip.digest), false);
    const ok = await fetch(`${url}/peer/code/default/${zip.digest}`, {
      headers: { [PEER_TOKEN_HEADER]: token },
    });
    assert.equal(ok.status, 200);
    assert.equal(digestOf(Buffer.from(await ok.arrayBuffer())), zip.digest);
  });

  it('keeps no copy whose bytes are not the digest asked for', async () => {
    const claimed = digestOf(Buffer.from('what the record names'));
    // The peer's file under that digest holds other bytes.
    mkdirSync(holder.dirOf('default'), { recursive: true });
    writeFileSync(holder.pathOf('default', claimed), 'other bytes');
    await agent('four', claimed);
    const here = new CodeStore(join(dir, 'checker'));
    asked.clear();
    await copier(here).start();
    await triedTwice(claimed);
    assert.equal(here.has('default', claimed), false);
    assert.equal(
      here.has('default', digestOf(Buffer.from('other bytes'))),
      false,
      'the wrong bytes were dropped',
    );
  });

  it('drops a copy that arrives after its workspace was deleted', async () => {
    const bytes = Buffer.from("a deleted workspace's zip");
    const digest = digestOf(bytes);
    let release = () => {};
    const released = new Promise<void>((r) => {
      release = r;
    });
    let onAsked = () => {};
    const askedOnce = new Promise<void>((r) => {
      onAsked = r;
    });
    // A peer that answers only once the test lets it: the workspace is deleted while the copy travels.
    const slow = Fastify();
    slow.get('/peer/code/:workspace/:digest', async (_req, reply) => {
      onAsked();
      await released;
      reply.header('content-type', 'application/zip');
      return reply.send(bytes);
    });
    const slowUrl = await slow.listen({ host: '127.0.0.1', port: 0 });
    const workspaceKey = { kind: 'Workspace', workspace: '_', parent: '', name: 'gone' };
    await store.write([{ op: 'create', key: workspaceKey, body: { metadata: { name: 'gone' } } }]);
    await store.write([
      {
        op: 'create',
        key: { kind: 'Agent', workspace: 'gone', parent: '', name: 'late' },
        body: { metadata: { name: 'late' }, source: { digest } },
      },
    ]);
    const here = new CodeStore(join(dir, 'late'));
    const c = new CodeCopies({ store, code: here, token, peers: async () => [slowUrl] });
    started.push(c);
    try {
      await c.start();
      await askedOnce;
      await store.write([{ op: 'delete', key: workspaceKey }]);
      release();
      const inFlight = (c as unknown as { fetching: Set<string> }).fetching;
      for (let i = 0; i < 100 && inFlight.size; i++) await sleep(50);
      assert.equal(inFlight.size, 0, 'the copy finished');
      assert.equal(here.has('gone', digest), false, "the deleted workspace's source came back");
    } finally {
      await slow.close();
    }
  });
});
