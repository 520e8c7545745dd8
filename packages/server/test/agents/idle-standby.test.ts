// Scale to zero with the last replica kept frozen (decision 090), end to end on real sandboxes: after its idle window
// an agent's replica is frozen and kept (the object counts 0 replicas and says so in an event), another workspace's
// request cannot wake it, the next call is answered by the same process (its start id and in-memory counter go on), a
// redeploy after scale to zero never answers from the frozen old revision, and the retention's end removes it (the
// next call starts a new process).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import yazl from 'yazl';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { inspectingDriver, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const NAME = 'idler';
const RETENTION_S = 8;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An app that answers an id drawn at its start (pids repeat across sandboxes: each has its own pid namespace), how
 * many requests it has answered, and its version.
 */
const app = (version: string) => `
const boot = require('crypto').randomUUID();
let count = 0;
require('http').createServer((q, s) => {
  count++;
  s.setHeader('content-type', 'application/json');
  s.end(JSON.stringify({ boot, count, version: ${JSON.stringify(version)} }));
}).listen(process.env.PORT, process.env.HOST);
`;

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const z = new yazl.ZipFile();
  for (const [name, data] of Object.entries(files))
    z.addBuffer(Buffer.from(data), name, { mtime: new Date(0) });
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('scale to zero keeps the last replica frozen', () => {
  let s: SandboxServer;
  let other: Tenant;
  before(async () => {
    s = await startSandboxServer({
      BERTH_STANDBY_AFTER: '1',
      BERTH_REPLICA_REMOVE_AFTER: '2',
      BERTH_REPLICA_RETENTION: String(RETENTION_S),
    });
    other = await newTenant(s, 'other-tenant');
  });
  after(async () => {
    await s?.api(`/agents/${NAME}`, { method: 'DELETE' });
    await s?.close();
  });

  const object = async () => (await s.api(`/agents/${NAME}`)).json() as Promise<any>;
  /** Uploads `version` and waits until the object is DEPLOYED with a new active revision. */
  async function deploy(version: string) {
    const before = (await object().catch(() => undefined))?.activeRevision;
    const put = await s.api(`/agents/${NAME}`, {
      method: 'PUT',
      json: { metadata: { name: NAME }, spec: { public: false, runtime: { memory: 256, maxScale: 1 } } },
    });
    assert.ok(put.ok, `${put.status} ${await put.text()}`);
    const up = await s.api(`/agents/${NAME}/code`, {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: new Uint8Array(
        await zipOf({ 'index.js': app(version), 'package.json': '{"name":"idler","main":"index.js"}' }),
      ),
    });
    assert.ok(up.ok, `${up.status} ${await up.text()}`);
    for (let i = 0; i < 600; i++) {
      const o = await object();
      if (o.status === 'DEPLOYED' && o.activeRevision && o.activeRevision !== before) return o;
      if (o.status === 'FAILED') assert.fail(JSON.stringify(o.events.at(-1)));
      await sleep(100);
    }
    assert.fail('never DEPLOYED');
  }
  const call = async () => {
    const res = await s.run(`${s.url}/run/default/agents/${NAME}`);
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    return body as { boot: string; count: number; version: string };
  };
  const replicaSandboxes = async () => {
    const driver = await inspectingDriver(s.dataDir);
    try {
      return (await driver.list()).filter((i) => i.id.startsWith('wl-'));
    } finally {
      await driver.close();
    }
  };
  /** Waits until the agent counts no replica while one replica sandbox stays, frozen: kept at scale to zero. */
  async function kept() {
    for (let i = 0; i < 200; i++) {
      const o = await object();
      const sandboxes = await replicaSandboxes();
      if (o.replicas === 0 && sandboxes.length === 1 && sandboxes[0].state === 'frozen') return sandboxes[0];
      await sleep(100);
    }
    assert.fail(`never kept: ${JSON.stringify(await replicaSandboxes())}`);
  }

  it('keeps the idle replica frozen; the next call is answered by the same process, never woken by another workspace', async () => {
    await deploy('v1');
    const first = await call();
    assert.equal(first.count, 1);
    const sandbox = await kept();
    const o = await object();
    assert.ok(
      o.events.some((e: any) => /^scaled to zero: replica .* kept in standby/.test(e.message)),
      JSON.stringify(o.events),
    );
    const listed = await (await s.api(`/agents/${NAME}/replicas`)).json();
    assert.equal(listed.length, 1);
    assert.equal(listed[0].id, sandbox.id);
    assert.ok(listed[0].standbyUntil, 'listed as kept in standby, with its end');

    // Another workspace's caller, on the first's address: refused, and the replica stays frozen.
    const foreign = await fetch(`${s.url}/run/default/agents/${NAME}`, {
      headers: { authorization: `Bearer ${other.key}` },
    });
    assert.equal(foreign.status, 404, await foreign.text());
    const stillFrozen = await replicaSandboxes();
    assert.deepEqual(
      stillFrozen.map((i) => [i.id, i.state]),
      [[sandbox.id, 'frozen']],
    );
    const own = await fetch(`${s.url}/run/${other.home}/agents/${NAME}`, {
      headers: { authorization: `Bearer ${other.key}` },
    });
    assert.equal(own.status, 404, 'the other workspace has no such agent');
    assert.equal((await replicaSandboxes())[0].state, 'frozen');

    const again = await call();
    assert.equal(again.boot, first.boot, 'the same process answered');
    assert.equal(again.count, 2, 'with its memory');
    assert.equal((await object()).replicas, 1, 'serving again');
  });

  it('a redeploy after scale to zero never answers from the frozen old revision', async () => {
    const old = await kept();
    const o = await deploy('v2');
    for (let i = 0; i < 5; i++) assert.equal((await call()).version, 'v2');
    const left = await replicaSandboxes();
    assert.ok(!left.some((i) => i.id === old.id), "the old revision's kept replica was removed");
    assert.equal(left.length, 1);
    assert.ok(o.activeRevision);
  });

  it('removes the kept replica once its retention is over; the next call starts a new process', async () => {
    const before = await call();
    await kept();
    for (let i = 0; i < 300 && (await replicaSandboxes()).length > 0; i++) await sleep(100);
    assert.deepEqual(await replicaSandboxes(), [], 'removed at the end of its retention');
    const o = await object();
    assert.ok(
      o.events.some((e: any) =>
        /removed: kept in standby since .* its retention \(8 s\) is over/.test(e.message),
      ),
      JSON.stringify(o.events),
    );
    const after = await call();
    assert.notEqual(after.boot, before.boot);
    assert.equal(after.count, 1, 'a new process');
  });
});
