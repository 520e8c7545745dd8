// The deploy reconciler of agents and functions over a real store and resource pipeline, the fake runtime with a
// stand-in daemon per instance, and a stand-in builder whose builds end when the test says: a reconcile asks for the
// build and returns (the build never holds a reconcile slot), the build's end wakes the object, which is then BUILT
// and DEPLOYED with its revision running; a failed build and a start command that exits are FAILED saying why; a
// delete removes the replicas and calls off a build under way.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import { BuildError, type BuiltApp } from '../../builds/builder.js';
import { SecretBox } from '../../crypto/secret-box.js';
import { KINDS } from '../../kinds/index.js';
import { Instances } from '../../runtime/instances.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import type { ResourceKey } from '../../store/store.js';
import { DaemonDriver, type Outcome } from '../../test-support/fake-daemon.js';
import { BuildSteps } from '../code/build-step.js';
import { revisionId } from '../code/source.js';
import { DONE, TerminalError } from '../core/reconciler.js';
import { deployReconciler } from './deploy.js';
import { ReplicaSet } from './replicas.js';

const CTX = { workspace: 'ws', parents: [], actor: 'tester' };
const KEY: ResourceKey = { kind: 'Agent', workspace: 'ws', parent: '', name: 'bot' };

/** A builder that builds when the test says (`finish`, `fail`), and remembers what it built. */
function standInBuilder() {
  const apps = new Map<string, BuiltApp>();
  const pending = new Map<string, { done: () => void; fail: (e: Error) => void; signal: AbortSignal }>();
  return {
    apps,
    pending,
    keyOf: (ws: string, digest: string) => `${ws}-${digest}`,
    baseImage: () => undefined,
    built: (ws: string, digest: string) => apps.get(`${ws}-${digest}`),
    builtByKey: (_ws: string, key: string) => apps.get(key),
    fetchGit: async (): Promise<never> => {
      throw new Error('no git here');
    },
    build(ws: string, digest: string, signal: AbortSignal): Promise<BuiltApp> {
      const key = `${ws}-${digest}`;
      return new Promise((ok, no) => {
        pending.set(key, {
          signal,
          fail: no,
          done: () => {
            const app: BuiltApp = {
              key,
              dir: `/nonexistent/apps/${key}`,
              plan: { language: 'node', deps: 'none', buildScript: false, start: 'node server.js' } as never,
              cached: false,
            };
            apps.set(key, app);
            ok(app);
          },
        });
        signal.addEventListener('abort', () => no(signal.reason));
      });
    },
  };
}

describe('the deploy reconciler', () => {
  let dir: string;
  let store: SqliteStore;
  let resources: Resources;
  let driver: DaemonDriver;
  let builder: ReturnType<typeof standInBuilder>;
  let replicas: ReplicaSet;
  let reconcile: (key: ResourceKey) => Promise<unknown>;
  let woken: string[];
  let outcome: () => Outcome;
  const signal = new AbortController().signal;
  const tick = () => new Promise((r) => setTimeout(r, 10));

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-deploy-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    resources = new Resources(store, KINDS, new SecretBox(randomBytes(32)), { regions: ['local'] });
    outcome = () => ({ status: 'running' });
    driver = new DaemonDriver({ onProcess: () => outcome() });
    const instances = new Instances({ driver });
    builder = standInBuilder();
    replicas = new ReplicaSet({ instances });
    const builds = new BuildSteps({ builder });
    woken = [];
    builds.onChange((k) => woken.push(k.name));
    const now = () => new Date();
    const r = deployReconciler({ resources, now, builder, builds, replicas, driver }, 'Agent');
    reconcile = (key) => r.reconcile(key, signal);
    await resources.create(resources.kind('Agent'), CTX, { metadata: { name: 'bot' }, spec: {} });
  });

  const upload = (digest: string) =>
    resources.updateStatus(KEY, {
      to: 'BUILDING',
      message: `source uploaded: ${digest}`,
      extras: { source: { digest, size: 1, uploadedAt: new Date().toISOString() } },
    });
  const status = async (): Promise<any> => (await store.get(KEY))?.body;
  const cleanup = async () => {
    await replicas.remove('ws', 'Agent', 'bot');
    await driver.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };

  it('waits for code while there is none', async () => {
    try {
      assert.deepEqual(await reconcile(KEY), DONE);
      assert.equal((await status()).status, 'UPLOADING');
    } finally {
      await cleanup();
    }
  });

  it('asks for the build and returns while it runs; its end wakes the object, then BUILT and DEPLOYED', async () => {
    try {
      await upload('d1');
      assert.deepEqual(await reconcile(KEY), DONE, 'returned with the build under way');
      assert.ok(builder.pending.has('ws-d1'), 'the build runs');
      assert.equal((await status()).status, 'BUILDING');
      woken.length = 0;
      builder.pending.get('ws-d1')?.done();
      await tick();
      assert.deepEqual(woken, ['bot'], "the build's end wakes the object");
      await reconcile(KEY);
      const o = await status();
      assert.equal(o.status, 'DEPLOYED');
      const app = builder.apps.get('ws-d1') as BuiltApp;
      assert.equal(o.activeRevision, revisionId(app));
      const statuses = o.events.map((e: { status: string }) => e.status);
      for (const s of ['BUILDING', 'BUILT', 'DEPLOYING', 'DEPLOYED'])
        assert.ok(statuses.includes(s), `${s} in ${statuses}`);
      assert.equal(replicas.get('ws', 'Agent', 'bot')?.replicas.length, 1);
    } finally {
      await cleanup();
    }
  });

  it('is FAILED with the build log’s last lines when its build fails', async () => {
    try {
      await upload('d1');
      await reconcile(KEY);
      builder.pending
        .get('ws-d1')
        ?.fail(new BuildError('the build exited with code 1', 'npm ERR! missing script'));
      await tick();
      await assert.rejects(
        reconcile(KEY),
        (e: Error) =>
          e instanceof TerminalError &&
          /build failed: the build exited[\s\S]*npm ERR! missing/.test(e.message),
      );
    } finally {
      await cleanup();
    }
  });

  it('is FAILED with the app’s own output when its start command exits before listening', async () => {
    try {
      outcome = () => ({ status: 'failed', exitCode: 1, logs: 'SyntaxError: boom\n' });
      await upload('d1');
      await reconcile(KEY);
      builder.pending.get('ws-d1')?.done();
      await tick();
      await assert.rejects(
        reconcile(KEY),
        (e: Error) =>
          e instanceof TerminalError && /revision \w+ did not start[\s\S]*SyntaxError: boom/.test(e.message),
      );
      assert.deepEqual(await driver.list(), [], 'no replica left');
    } finally {
      await cleanup();
    }
  });

  it("in a cluster, waits while its volume's data is on another node, and deploys on that node's lead", async () => {
    try {
      const builds = new BuildSteps({ builder });
      const now = () => new Date();
      const on = (node: string) =>
        deployReconciler({ resources, now, builder, builds, replicas, driver, node }, 'Agent');
      const vol = { kind: 'Volume', workspace: 'ws', parent: '', name: 'data' };
      await resources.create(resources.kind('Volume'), CTX, {
        metadata: { name: 'data' },
        spec: { size: 64 },
      });
      await resources.updateStatus(vol, { to: 'DEPLOYED', extras: { node: 'node-a' } });
      await resources.replace(resources.kind('Agent'), CTX, 'bot', {
        metadata: { name: 'bot' },
        spec: { volumes: [{ name: 'data', mountPath: '/data' }] },
      });
      await upload('d1');
      const onB = on('node-b');
      await onB.reconcile(KEY, signal);
      builder.pending.get('ws-d1')?.done();
      await tick();
      // node-b leads; the volume's data is on node-a's disk (not in this runtime).
      const waited = await onB.reconcile(KEY, signal);
      assert.deepEqual(waited, { requeueAfterMs: 2_000 });
      const o = await status();
      assert.notEqual(o.status, 'FAILED');
      assert.match(
        o.events.at(-1).message,
        /^waiting: the data of volume "data" is on node node-a, which made it, and this workload runs on the node leading the controllers \(node-b\): it starts once node node-a leads them/,
      );
      assert.equal(replicas.get('ws', 'Agent', 'bot'), undefined, 'nothing started');
      assert.equal(driver.volumes.has('ws/data'), false, 'no empty volume made');
      // node-a leads again, its disk holding the data: the agent deploys there.
      driver.volumes.set('ws/data', { sizeMb: 64 });
      await on('node-a').reconcile(KEY, signal);
      assert.equal((await status()).status, 'DEPLOYED');
      assert.equal(replicas.get('ws', 'Agent', 'bot')?.replicas.length, 1);
    } finally {
      await cleanup();
    }
  });

  it('removes its replicas when deleted, and calls off a build under way', async () => {
    try {
      await upload('d1');
      await reconcile(KEY);
      builder.pending.get('ws-d1')?.done();
      await tick();
      await reconcile(KEY);
      assert.equal((await driver.list()).length, 1);
      await upload('d2');
      await reconcile(KEY);
      assert.ok(builder.pending.has('ws-d2'));
      await resources.delete(resources.kind('Agent'), CTX, 'bot');
      await reconcile(KEY);
      assert.equal(builder.pending.get('ws-d2')?.signal.aborted, true, 'its build called off');
      assert.deepEqual(await driver.list(), [], 'its replicas removed');
      assert.equal(await store.get(KEY), undefined);
    } finally {
      await cleanup();
    }
  });
});
