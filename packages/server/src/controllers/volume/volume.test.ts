// The volume controller and the sandbox controller's attach/detach over a real SQLite store and resource
// pipeline, with the sanctioned fake runtime (runtime/fake.ts). The real loop mounts are tested against the
// Linux driver in runtime/linux/volumes.test.ts and test/sandboxes/volumes.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SecretBox } from '../../crypto/secret-box.js';
import { ApiError } from '../../errors.js';
import { sandbox as sandboxKind } from '../../kinds/sandbox.js';
import { volume as volumeKind } from '../../kinds/volume.js';
import { volumeTemplate } from '../../kinds/volume-template.js';
import type { SandboxInfo, SandboxSpec } from '../../runtime/driver.js';
import { ImageStore } from '../../runtime/images/image-store.js';
import { FakeDriver } from '../../runtime/fake.js';
import { Instances } from '../../runtime/instances.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { type ResourceKey, StoreError } from '../../store/store.js';
import { TerminalError } from '../core/reconciler.js';
import { sandboxReconciler } from '../sandbox/sandbox.js';
import { removeOrphanArchives, volumeReconciler } from './volume.js';
import type { VolumeCapacity } from './volume-capacity.js';

const CTX = { workspace: 'default', parents: [], actor: 'tester' };

class RecordingDriver extends FakeDriver {
  specs: SandboxSpec[] = [];
  constructor(private readonly socket: string) {
    super();
  }
  override socketPath(): string {
    return this.socket;
  }
  override async ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo> {
    this.specs.push(spec);
    return super.ensure(id, spec);
  }
}

async function setup(capacity?: VolumeCapacity, node?: string) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-vol-ctl-'));
  const socket = join(dir, 'health.sock');
  const health: Server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ status: 'ok', activeKeepAlive: 0 }));
  });
  await new Promise<void>((r) => health.listen(socket, r));
  const now = () => new Date();
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(
    store,
    [sandboxKind, volumeKind, volumeTemplate],
    new SecretBox(randomBytes(32)),
    { regions: ['local'], now },
  );
  const driver = new RecordingDriver(socket);
  const archives = new Map<string, string>();
  const reconcilers = {
    Sandbox: sandboxReconciler({
      resources,
      now,
      instances: new Instances({ driver }),
      images: new ImageStore({ dataDir: dir }),
    }),
    Volume: volumeReconciler({
      resources,
      now,
      driver,
      archiveOf: (ws, t, v) => archives.get(`${ws}/${t}/${v}`),
      capacity,
      node,
    }),
  };
  const key = (kind: string, name: string): ResourceKey => ({ kind, workspace: 'default', parent: '', name });
  /** One reconcile as the manager runs it: a terminal error is recorded as FAILED with its message. */
  const settle = async (kind: 'Sandbox' | 'Volume', name: string) => {
    try {
      return await reconcilers[kind].reconcile(key(kind, name), new AbortController().signal);
    } catch (e) {
      if (!(e instanceof TerminalError)) throw e;
      await resources.recordEvent(key(kind, name), e.message, 'FAILED');
    }
  };
  return {
    resources,
    now,
    driver,
    archives,
    settle,
    get: async (kind: string, name: string): Promise<any> => (await store.get(key(kind, name)))?.body,
    volume: (name: string, spec: object = {}) =>
      resources.create(volumeKind, CTX, { metadata: { name }, spec: { size: 64, ...spec } }),
    sandbox: (name: string, volumes: object[]) =>
      resources.create(sandboxKind, CTX, { metadata: { name }, spec: { volumes } }),
    async close() {
      await store.close();
      await new Promise((r) => health.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('a volume is created in the runtime with its size and becomes DEPLOYED', async () => {
  const env = await setup();
  try {
    await env.volume('data', { size: 128 });
    await env.settle('Volume', 'data');
    const v = await env.get('Volume', 'data');
    assert.equal(v.status, 'DEPLOYED');
    assert.deepEqual(env.driver.volumes.get('default/data'), { sizeMb: 128 });
  } finally {
    await env.close();
  }
});

test('a sandbox starts with its volume mounted and the volume names it as its holder', async () => {
  const env = await setup();
  try {
    await env.volume('data');
    await env.settle('Volume', 'data');
    await env.sandbox('box', [{ name: 'data', mountPath: '/data', readOnly: true }]);
    await env.settle('Sandbox', 'box');
    assert.equal((await env.get('Sandbox', 'box')).status, 'DEPLOYED');
    assert.deepEqual(env.driver.specs.at(-1)?.volumes, [
      { hostPath: '/nonexistent/berth-fake-volumes/default/data', mountPath: '/data', readOnly: true },
    ]);
    assert.equal((await env.get('Volume', 'data')).state.attachedTo, 'sandbox:box');
  } finally {
    await env.close();
  }
});

test('a sandbox whose volume was deleted is FAILED with the reason, never DEPLOYED without the mount', async () => {
  const env = await setup();
  try {
    await env.volume('data');
    await env.settle('Volume', 'data');
    await env.sandbox('box', [{ name: 'data', mountPath: '/data' }]);
    await env.resources.delete(volumeKind, CTX, 'data');
    await env.settle('Sandbox', 'box');
    const b = await env.get('Sandbox', 'box');
    assert.equal(b.status, 'FAILED');
    assert.match(b.events.at(-1).message, /volume "data" is being deleted/);
    assert.equal(env.driver.specs.length, 0, 'no sandbox was started');
  } finally {
    await env.close();
  }
});

test('a sandbox whose volume cannot be mounted is FAILED with the runtime reason', async () => {
  const env = await setup();
  try {
    await env.volume('data');
    await env.settle('Volume', 'data');
    env.driver.volumeFailures.set('default/data', 'mount: wrong fs type');
    await env.sandbox('box', [{ name: 'data', mountPath: '/data' }]);
    await env.settle('Sandbox', 'box');
    const b = await env.get('Sandbox', 'box');
    assert.equal(b.status, 'FAILED');
    assert.match(b.events.at(-1).message, /could not be mounted: mount: wrong fs type/);
    assert.equal(env.driver.specs.length, 0);
  } finally {
    await env.close();
  }
});

test('in a cluster a volume records the node that made it; a holder where its data is not fails, never mounting an empty one', async () => {
  const env = await setup(undefined, 'node-a');
  try {
    await env.volume('data');
    await env.settle('Volume', 'data');
    const v = await env.get('Volume', 'data');
    assert.equal(v.status, 'DEPLOYED');
    assert.equal(v.node, 'node-a');
    assert.match(v.events.at(-1).message, /ready on node node-a/);
    // The sandbox starts where the volume's data is not (another node leads now, say): nothing is made anew.
    env.driver.volumes.delete('default/data');
    await env.sandbox('box', [{ name: 'data', mountPath: '/data' }]);
    await env.settle('Sandbox', 'box');
    const b = await env.get('Sandbox', 'box');
    assert.equal(b.status, 'FAILED');
    assert.match(
      b.events.at(-1).message,
      /volume "data" could not be mounted: the data of volume "data" is not on this machine \(it was made on node node-a, whose disk holds it/,
    );
    assert.equal(env.driver.volumes.has('default/data'), false, 'no empty volume was made');
    assert.equal(env.driver.specs.length, 0, 'no sandbox was started');
  } finally {
    await env.close();
  }
});

test('a sandbox waits while its volume is still being created, then starts with it', async () => {
  const env = await setup();
  try {
    await env.volume('data');
    await env.sandbox('box', [{ name: 'data', mountPath: '/data' }]);
    const first = await env.settle('Sandbox', 'box');
    assert.ok(first && 'requeueAfterMs' in first);
    assert.equal((await env.get('Sandbox', 'box')).status, 'DEPLOYING');
    await env.settle('Volume', 'data');
    await env.settle('Sandbox', 'box');
    assert.equal((await env.get('Sandbox', 'box')).status, 'DEPLOYED');
  } finally {
    await env.close();
  }
});

test('a second holder is refused with the first one named; the volume is free once the first is deleted', async () => {
  const env = await setup();
  try {
    await env.volume('data');
    await env.settle('Volume', 'data');
    await env.sandbox('one', [{ name: 'data', mountPath: '/data' }]);
    await env.sandbox('two', [{ name: 'data', mountPath: '/data' }]);
    await Promise.all([env.settle('Sandbox', 'one'), env.settle('Sandbox', 'two')]);
    const [one, two] = [await env.get('Sandbox', 'one'), await env.get('Sandbox', 'two')];
    const winner = one.status === 'DEPLOYED' ? 'one' : 'two';
    const loser = winner === 'one' ? two : one;
    assert.equal(loser.status, 'FAILED', 'exactly one holder wins');
    assert.match(loser.events.at(-1).message, new RegExp(`attached to sandbox:${winner}`));
    assert.equal((await env.get('Volume', 'data')).state.attachedTo, `sandbox:${winner}`);

    await env.resources.delete(sandboxKind, CTX, winner);
    await env.settle('Sandbox', winner);
    assert.equal((await env.get('Volume', 'data')).state.attachedTo, undefined);
  } finally {
    await env.close();
  }
});

test('DELETE of an attached volume is a 409 naming the holder; detached, it goes to TERMINATED with its data, then its record', async () => {
  const env = await setup();
  try {
    await env.volume('data');
    await env.settle('Volume', 'data');
    await env.sandbox('box', [{ name: 'data', mountPath: '/data' }]);
    await env.settle('Sandbox', 'box');
    await assert.rejects(env.resources.delete(volumeKind, CTX, 'data'), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 409);
      assert.match(e.message, /attached to sandbox:box/);
      return true;
    });
    assert.ok(env.driver.volumes.has('default/data'));
    await env.resources.delete(sandboxKind, CTX, 'box');
    await env.settle('Sandbox', 'box');
    await env.resources.delete(volumeKind, CTX, 'data');
    const steps: { status: string; terminatedAt?: string }[] = [];
    const unwatch = env.resources.store.watch((c) => {
      if (c.object.kind === 'Volume')
        steps.push({
          status: c.type === 'DELETED' ? 'removed' : c.object.body.status,
          terminatedAt: c.object.body.terminatedAt,
        });
    });
    await env.settle('Volume', 'data');
    unwatch();
    assert.deepEqual(
      steps.map((x) => x.status),
      ['TERMINATED', 'removed'],
      'TERMINATED with its data gone, then the record at once',
    );
    assert.ok(!Number.isNaN(Date.parse(steps[0].terminatedAt ?? '')));
    assert.equal(await env.get('Volume', 'data'), undefined);
    assert.ok(!env.driver.volumes.has('default/data'), 'data removed');
  } finally {
    await env.close();
  }
});

test('size and region cannot change (422); a volume of another workspace is another volume', async () => {
  const env = await setup();
  try {
    await env.volume('data', { size: 64 });
    await assert.rejects(
      env.resources.replace(volumeKind, CTX, 'data', { metadata: { name: 'data' }, spec: { size: 128 } }),
      (e: unknown) =>
        e instanceof ApiError && e.status === 422 && /\/spec\/size/.test(JSON.stringify(e.opts.errors)),
    );
    await assert.rejects(
      env.resources.replace(volumeKind, CTX, 'data', {
        metadata: { name: 'data' },
        spec: { size: 64, region: 'elsewhere' },
      }),
      (e: unknown) => e instanceof ApiError && e.status === 422,
    );
    await env.resources.create(
      volumeKind,
      { ...CTX, workspace: 'other' },
      { metadata: { name: 'data' }, spec: {} },
    );
    await assert.rejects(
      env.resources.create(volumeKind, CTX, { metadata: { name: 'data' }, spec: {} }),
      (e: unknown) => e instanceof StoreError && e.reason === 'exists',
    );
  } finally {
    await env.close();
  }
});

test('a volume is seeded from the named template version, the latest by default; a deleted one is a clear FAILED', async () => {
  const env = await setup();
  try {
    const versions = [
      { name: 'v1', versionId: '00000000-0000-4000-8000-000000000001' },
      { name: 'v2', versionId: '00000000-0000-4000-8000-000000000002' },
    ];
    await env.resources.create(volumeTemplate, CTX, { metadata: { name: 'deps' }, spec: {} });
    await env.resources.store.write([
      {
        op: 'update',
        key: { kind: 'VolumeTemplate', workspace: 'default', parent: '', name: 'deps' },
        mutate: (cur) => ({ ...cur.body, versions: versions.map((v) => ({ ...v, templateName: 'deps' })) }),
      },
    ]);
    for (const v of versions) env.archives.set(`default/deps/${v.versionId}`, `/archives/${v.name}.tar`);
    await env.volume('latest', { template: 'deps' });
    await env.volume('first', { template: 'deps:v1' });
    await env.volume('missing', { template: 'deps:v9' });
    for (const n of ['latest', 'first', 'missing']) await env.settle('Volume', n);
    assert.equal(env.driver.volumes.get('default/latest')?.seed, '/archives/v2.tar');
    assert.equal(env.driver.volumes.get('default/first')?.seed, '/archives/v1.tar');
    const missing = await env.get('Volume', 'missing');
    assert.equal(missing.status, 'FAILED');
    assert.match(missing.events.at(-1).message, /version "v9" of volume template "deps" does not exist/);
    assert.ok(!env.driver.volumes.has('default/missing'));
  } finally {
    await env.close();
  }
});

test('volumes past the configured totals are FAILED saying how full the space is; a removed one frees its space', async () => {
  const env = await setup({ totalMb: 200, workspaceMb: 100 });
  try {
    await env.volume('a', { size: 64 });
    await env.volume('b', { size: 64 });
    await Promise.all([env.settle('Volume', 'a'), env.settle('Volume', 'b')]);
    const statuses = [(await env.get('Volume', 'a')).status, (await env.get('Volume', 'b')).status].sort();
    assert.deepEqual(statuses, ['DEPLOYED', 'FAILED'], 'exactly one fits the workspace total');
    const failed = (await env.get('Volume', 'a')).status === 'FAILED' ? 'a' : 'b';
    assert.match(
      (await env.get('Volume', failed)).events.at(-1).message,
      /volume space of workspace "default" is full: 64 MB of 100 MB in use, 64 MB asked/,
    );
    await env.resources.create(
      volumeKind,
      { ...CTX, workspace: 'other' },
      { metadata: { name: 'c' }, spec: { size: 100 } },
    );
    await env.resources.create(
      volumeKind,
      { ...CTX, workspace: 'third' },
      { metadata: { name: 'd' }, spec: { size: 64 } },
    );
    const other = (name: string, ws: string) =>
      volumeReconciler({
        resources: env.resources,
        now: () => new Date(),
        driver: env.driver,
        archiveOf: () => undefined,
        capacity: { totalMb: 200, workspaceMb: 100 },
      }).reconcile({ kind: 'Volume', workspace: ws, parent: '', name }, new AbortController().signal);
    await other('c', 'other');
    await assert.rejects(
      other('d', 'third'),
      /volume space of this server is full: 164 MB of 200 MB in use, 64 MB asked/,
    );

    const fits = failed === 'a' ? 'b' : 'a';
    await env.resources.delete(volumeKind, CTX, fits);
    await env.settle('Volume', fits);
    await env.volume('e', { size: 64 });
    await env.settle('Volume', 'e');
    assert.equal((await env.get('Volume', 'e')).status, 'DEPLOYED');
  } finally {
    await env.close();
  }
});

test('at start, archives no template version names are removed; named ones are kept', async () => {
  const env = await setup();
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-archives-'));
  try {
    const kept = '00000000-0000-4000-8000-00000000000a';
    const dropped = '00000000-0000-4000-8000-00000000000b';
    await env.resources.create(volumeTemplate, CTX, { metadata: { name: 'live' }, spec: {} });
    await env.resources.store.write([
      {
        op: 'update',
        key: { kind: 'VolumeTemplate', workspace: 'default', parent: '', name: 'live' },
        mutate: (cur) => ({ ...cur.body, versions: [{ name: 'v1', versionId: kept, templateName: 'live' }] }),
      },
    ]);
    const dir = (t: string) => join(dataDir, 'volume-templates', 'default', t);
    for (const t of ['live', 'deleted']) mkdirSync(dir(t), { recursive: true });
    for (const f of [`${kept}.tar`, `${dropped}.tar`, `${kept}.tar.part`])
      writeFileSync(join(dir('live'), f), 'x');
    writeFileSync(join(dir('deleted'), `${kept}.tar`), 'x');
    const removed = await removeOrphanArchives({ resources: env.resources, now: () => new Date(), dataDir });
    assert.equal(removed.length, 3);
    assert.ok(existsSync(join(dir('live'), `${kept}.tar`)));
    assert.ok(!existsSync(join(dir('live'), `${dropped}.tar`)));
    assert.ok(!existsSync(join(dir('live'), `${kept}.tar.part`)));
    assert.ok(!existsSync(dir('deleted')));
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
    await env.close();
  }
});
