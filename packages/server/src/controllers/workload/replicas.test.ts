// The replica set over the fake runtime with a stand-in daemon per instance (test-support/fake-daemon.ts): what it
// starts, for whom, and when it lets go of a replica. Its behaviour under the workspaces' quotas is in
// replicas-quota.test.ts.
import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { Instances } from '../../runtime/instances.js';
import { DaemonDriver, type Outcome } from '../../test-support/fake-daemon.js';
import { APP_PORT, ReplicaSet, ReplicaStartError, type RevisionRun, type Workload } from './replicas.js';

const run = (id: string, over: Partial<RevisionRun> = {}): RevisionRun => ({
  id,
  appDir: '/nonexistent/app',
  start: 'node server.js',
  memoryMb: 256,
  envs: { GREETING: 'hi' },
  minScale: 0,
  maxScale: 3,
  volumes: [],
  ...over,
});
const AGENT = { workspace: 'ws', kind: 'Agent' as const, name: 'bot', public: false };
const live = (w: Workload | undefined) => (w?.replicas ?? []).filter((r) => !r.gone);

describe('the replica set', () => {
  let outcome: (id: string) => Outcome | Promise<Outcome>;
  let driver: DaemonDriver;
  let set: ReplicaSet;
  const drivers: DaemonDriver[] = [];
  beforeEach(() => {
    outcome = () => ({ status: 'running' });
    driver = new DaemonDriver({ onProcess: (id) => outcome(id) });
    drivers.push(driver);
    set = new ReplicaSet({ instances: new Instances({ driver }) });
  });
  after(async () => {
    for (const d of drivers) await d.close();
  });

  it('deploys one replica of the revision, started with its command and port, owned by its workload', async () => {
    await set.deploy(AGENT, run('r1'));
    const w = set.get('ws', 'Agent', 'bot');
    assert.equal(live(w).length, 1);
    const [info] = await driver.list();
    assert.deepEqual(info.owner, { kind: 'Agent', workspace: 'ws', name: 'bot', role: 'replica' });
    const [p] = driver.started.get(info.id) ?? [];
    assert.equal(p.command, 'node server.js');
    assert.equal(p.name, 'app');
    assert.deepEqual(p.waitForPorts, [APP_PORT]);
    assert.equal(p.env?.GREETING, 'hi');
    assert.equal(p.env?.PORT, String(APP_PORT));
  });

  it('fails a deploy whose start command exits before listening, with its output, and leaves nothing', async () => {
    outcome = () => ({ status: 'failed', exitCode: 3, logs: 'cannot find module server.js\n' });
    await assert.rejects(
      set.deploy(AGENT, run('r1')),
      (e: Error) => e instanceof ReplicaStartError && /code 3[\s\S]*cannot find module/.test(e.message),
    );
    assert.deepEqual(await driver.list(), []);
    assert.equal(set.get('ws', 'Agent', 'bot'), undefined);
  });

  it('moves to a new revision only once it listens: the old replica serves until then, then goes', async () => {
    await set.deploy(AGENT, run('r1'));
    const old = live(set.get('ws', 'Agent', 'bot'))[0];
    let listen!: () => void;
    outcome = () => new Promise<Outcome>((r) => (listen = () => r({ status: 'running' })));
    const deploying = set.deploy(AGENT, run('r2'));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(set.get('ws', 'Agent', 'bot')?.run.id, 'r1', 'the old revision still serves');
    assert.equal(old.gone, false);
    listen();
    await deploying;
    assert.equal(set.get('ws', 'Agent', 'bot')?.run.id, 'r2');
    assert.equal(old.gone, true);
    assert.equal(await driver.inspect(old.id), undefined, 'its instance removed');
  });

  it('starts ONE replica from zero however many requests wait for it, and no more than maxScale', async () => {
    await set.deploy(AGENT, run('r1', { maxScale: 2 }));
    const w = set.get('ws', 'Agent', 'bot') as Workload;
    await set.scaleIn(w, w.replicas[0]);
    const before = driver.creations;
    const got = await Promise.all(Array.from({ length: 5 }, () => set.acquire(w, 10)));
    assert.equal(driver.creations - before, 1);
    assert.equal(new Set(got.map((r) => r.id)).size, 1);
    assert.equal(set.scaleOut(w, 10), 1, 'one more, up to maxScale');
    // The second replica starts in the background: wait for it (bounded), not for a guessed time.
    for (let i = 0; i < 200 && live(w).length < 2; i++) await new Promise((r) => setTimeout(r, 25));
    assert.equal(live(w).length, 2);
    assert.equal(set.scaleOut(w, 10), 0);
  });

  it("takes over an earlier server's replica of the same revision and spec; removes one of another spec", async () => {
    await set.deploy(AGENT, run('r1'));
    const kept = live(set.get('ws', 'Agent', 'bot'))[0];
    // A server restarted: a new replica set finds the instances the garbage collector kept for it.
    const restarted = new ReplicaSet({ instances: new Instances({ driver }) });
    restarted.holdLeftovers(await driver.list());
    const before = driver.creations;
    await restarted.deploy(AGENT, run('r1'));
    assert.equal(driver.creations, before, 'nothing started');
    assert.equal(live(restarted.get('ws', 'Agent', 'bot'))[0].id, kept.id);
    const other = new ReplicaSet({ instances: new Instances({ driver }) });
    other.holdLeftovers(await driver.list());
    await other.deploy(AGENT, run('r1', { memoryMb: 512 }));
    assert.equal(await driver.inspect(kept.id), undefined, 'another spec: not taken over, removed');
    assert.equal((await driver.list()).length, 1);
  });
});
