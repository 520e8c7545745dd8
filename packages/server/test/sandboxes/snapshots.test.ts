// Snapshots, restore, fork, archive and unarchive (decision 053) with the unmodified @blaxel/core SDK and the API:
// the SDK's flows and wire shapes, writes kept byte for byte across cycles, connections not dropped by a capture,
// forks that share no writable state, another workspace's sandbox and snapshots out of reach, the quota, and a
// capture killed half-way that leaves no snapshot.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { existsSync, readdirSync } from 'node:fs';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
import { inspectingDriver, type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

const resultOf = (stdout: string) => {
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, `the SDK script printed no result: ${stdout}`);
  return JSON.parse(line.slice('RESULT '.length));
};

describe('@blaxel/core snapshots, restore, fork and archive', () => {
  let server: SandboxServer;
  let r: any;
  let held: any;
  before(async () => {
    server = await startSandboxServer();
    const env = { SANDBOX_PREFIX: 'snp', SANDBOX_MEMORY: String(TEST_MEMORY_MB), CYCLES: '20' };
    r = resultOf(
      await runBlaxelScript(join(import.meta.dirname, 'blaxel-snapshots.mjs'), server, env, 180_000),
    );
    held = resultOf(
      await runBlaxelScript(join(import.meta.dirname, 'blaxel-snapshot-cycles.mjs'), server, env, 180_000),
    );
  });
  after(() => server?.close());

  it('a snapshot has the service’s fields and says it holds files only; a second of the same name is a 409', () => {
    assert.equal(r.create.name, 'before', JSON.stringify(r.create));
    assert.match(r.create.id, /^snap-[0-9a-f]{16}$/);
    assert.equal(r.create.status, 'ready');
    assert.equal(r.create.workspace, 'default');
    assert.deepEqual(r.create.source, { kind: 'sandbox', name: 'snp-src', deleted: false });
    assert.equal(r.create.spec.memory, TEST_MEMORY_MB);
    assert.deepEqual(r.create.spec.holds, { files: true, memory: false, processes: false, volumes: false });
    assert.equal(r.duplicate, 409);
  });

  it('restore brings the files back (root and /usr) under the same name and URL, without the later writes', () => {
    assert.deepEqual(r.restore, {
      answer: { name: 'snp-src', snapshotId: r.create.id },
      a: 'v1',
      b: null,
      usr: 'usr-file\n',
      url: true,
    });
  });

  it('lists: the sandbox’s snapshots, and the workspace’s paged as {data, meta}; get by id and by name', () => {
    assert.deepEqual(r.list, {
      mine: ['before', 'second', 'third'],
      pageSize: 2,
      hasMore: true,
      all: ['before', 'second', 'third'],
      got: 'before',
      byName: 'second',
    });
  });

  it('a fork of the sandbox has its files and envs and shares no writes with it either way', () => {
    assert.deepEqual(r.fork, {
      answer: { name: 'snp-f1', snapshotId: 'string', type: 'sandbox' },
      a: 'v1',
      forkOnlyInSource: null,
      sourceOnlyInFork: null,
      greeting: 'hi',
      usr: 'usr-file\n',
    });
  });

  it('a fork of a snapshot takes the envs given over the source’s', () => {
    assert.deepEqual(r.forkSnapshot, {
      answer: { name: 'snp-f2', snapshotId: r.create.id, type: 'sandbox' },
      a: 'v1',
      envs: 'forked x',
    });
  });

  it('a fork into an application is a 422 (Berth has none); onto an existing name a 409', () => {
    assert.equal(r.application, 422);
    assert.equal(r.forkExisting, 409);
  });

  it('archive goes to ARCHIVED and unarchive back to DEPLOYED with the files', () => {
    assert.deepEqual(r.archive, { archived: 'ARCHIVED', status: 'DEPLOYED', forkOnly: 'mine', a: 'v1' });
  });

  it('a snapshot outlives its source (source.deleted) and forks after it; deleted, it is a 404', () => {
    assert.deepEqual(r.sourceDeleted, { deleted: true, a: 'v1' });
    assert.deepEqual(r.delete, { after: 404 });
  });

  it('a preview request, a WebSocket and a log stream held open across a snapshot are not dropped', () => {
    assert.deepEqual(held.held, {
      websocket: { state: 'open', framesAfterSnapshot: true, inOrder: true },
      status: 'ready',
      answer: '200 slow-ok',
      ticksAfterSnapshot: true,
      streamErrors: 0,
      stillRunning: 'running',
    });
  });

  it('20 rounds of writes, snapshot, more writes and restore come back byte for byte', () => {
    assert.deepEqual(held.cycles, { rounds: 20, bad: [] });
  });

  it('another workspace reaches neither a sandbox’s snapshots nor a snapshot: 404 for each, nothing made', async () => {
    await server.create('snp-owner');
    const mine = await server.api('/sandboxes/snp-owner/snapshots', {
      method: 'POST',
      json: { name: 'own' },
    });
    assert.equal(mine.status, 200);
    const id = (await mine.json()).id;
    const b = await newTenant(server, 'snp-intruder');
    const asB = (path: string, method = 'GET', json?: unknown) =>
      server.api(path, { method, key: b.key, ...(json !== undefined ? { json } : {}) });
    const tries: [string, string, unknown?][] = [
      ['/sandboxes/snp-owner/snapshots', 'GET'],
      ['/sandboxes/snp-owner/snapshots', 'POST', { name: 'stolen' }],
      [`/sandboxes/snp-owner/snapshots/${id}/restore`, 'POST'],
      [`/sandboxes/snp-owner/snapshots/${id}`, 'DELETE'],
      ['/sandboxes/snp-owner/fork', 'POST', { targetName: 'stolen', targetType: 'sandbox' }],
      ['/sandboxes/snp-owner/archive', 'POST'],
      ['/snapshots', 'POST', { name: 'stolen', source: { name: 'snp-owner' } }],
      [`/snapshots/${id}`, 'GET'],
      ['/snapshots/own', 'GET'],
      [`/snapshots/${id}/fork`, 'POST', { targetName: 'stolen', targetType: 'sandbox' }],
      [`/snapshots/${id}`, 'DELETE'],
    ];
    for (const [path, method, json] of tries)
      assert.equal((await asB(path, method, json)).status, 404, `${method} ${path}`);
    const listed = await (await asB('/snapshots')).json();
    assert.deepEqual(listed.length ?? listed.data.length, 0);
    const viaHeader = await server.api(`/snapshots/${id}`, {
      key: b.key,
      headers: { 'x-service-workspace': 'default' },
    });
    assert.equal(viaHeader.status, 404, 'naming A’s workspace, of which B is no member, is a 404 too');
    assert.equal((await asB('/sandboxes/stolen')).status, 404);
    assert.equal((await server.api('/sandboxes/stolen')).status, 404);
    assert.equal((await server.api(`/snapshots/${id}`)).status, 200, 'A’s snapshot is still there');
  });

  it('10 forks at once of one snapshot all run, share its layer (no copy each) and none sees another’s writes', async () => {
    const snap = await (
      await server.api('/sandboxes/snp-owner/snapshots', { method: 'POST', json: { name: 'for-forks' } })
    ).json();
    const layersDir = join(server.dataDir, 'snapshots', 'workspaces', 'default', 'layers');
    const layersBefore = readdirSync(layersDir).length;
    const names = Array.from({ length: 10 }, (_, i) => `snp-par-${i}`);
    const answers = await Promise.all(
      names.map((n) =>
        server.api(`/snapshots/${snap.id}/fork`, {
          method: 'POST',
          json: { targetName: n, targetType: 'sandbox' },
        }),
      ),
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      names.map(() => 200),
    );
    const sh = async (name: string, command: string) => {
      const res = await server.run(`${server.url}/run/default/sandboxes/${name}/process`, {
        method: 'POST',
        json: { command, waitForCompletion: true },
      });
      return ((await res.json()).stdout ?? '').trim();
    };
    await Promise.all(names.map((n) => sh(n, `echo ${n} > /home/user/who`)));
    const seen = await Promise.all(names.map((n) => sh(n, 'cat /home/user/who')));
    assert.deepEqual(seen, names);
    assert.equal(readdirSync(layersDir).length, layersBefore, 'no layer was added or copied per fork');
    await Promise.all(names.map((n) => server.api(`/sandboxes/${n}`, { method: 'DELETE' })));
  });

  it('an archived sandbox has no instance; a request to it is a 409 saying how to unarchive, not a wake-up', async () => {
    await server.create('snp-arch');
    const url = `${server.url}/run/default/sandboxes/snp-arch/process`;
    const cmd = { command: 'echo kept > /home/user/k', waitForCompletion: true };
    assert.equal((await server.run(url, { method: 'POST', json: cmd })).status, 200);
    assert.equal((await server.api('/sandboxes/snp-arch/archive', { method: 'POST' })).status, 200);
    await server.waitFor('snp-arch', (b) => b.status === 'ARCHIVED', 'ARCHIVED');
    const driver = await inspectingDriver(server.dataDir);
    try {
      assert.equal(await driver.inspect(sandboxId('default', 'snp-arch')), undefined, 'its instance is gone');
    } finally {
      await driver.close();
    }
    const refused = await server.run(url, {
      method: 'POST',
      json: { command: 'true', waitForCompletion: true },
    });
    assert.equal(refused.status, 409);
    assert.match((await refused.json()).detail, /unarchive/);
    assert.equal((await server.api('/sandboxes/snp-arch/archive', { method: 'POST' })).status, 409);
    assert.equal((await server.api('/sandboxes/snp-arch/unarchive', { method: 'POST' })).status, 200);
    await server.waitFor('snp-arch', (b) => b.status === 'DEPLOYED', 'DEPLOYED');
    const back = await server.run(url, {
      method: 'POST',
      json: { command: 'cat /home/user/k', waitForCompletion: true },
    });
    assert.equal((await back.json()).stdout.trim(), 'kept');
    // Deleted, the sandbox's own archive layer (no snapshot names it) is freed.
    const top = (await (await server.api('/sandboxes/snp-arch')).json()).rootLayers[0];
    const layer = join(server.dataDir, 'snapshots', 'workspaces', 'default', 'layers', top);
    assert.ok(existsSync(layer));
    await server.api('/sandboxes/snp-arch', { method: 'DELETE' });
    for (let i = 0; i < 100 && existsSync(layer); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(existsSync(layer), false, 'its archive layer was freed');
  });
});
