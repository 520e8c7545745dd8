// Builds as a step of their own, with a stand-in builder whose builds end when the test says: objects asking for the
// same source share one build and each is told its outcome once; the server's bound and each workspace's quota hold
// builds back in order; the objects are woken when their build starts and ends; a build no one waits for is stopped.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BuiltApp } from '../../builds/builder.js';
import { SqliteStore } from '../../store/sqlite.js';
import type { ResourceKey } from '../../store/store.js';
import { QuotaLedger } from '../core/quota-ledger.js';
import { BuildSteps } from './build-step.js';

/** A builder whose builds wait for `finish(key)` (or `fail`), and see their abort signal. */
function standIn() {
  const pending = new Map<
    string,
    { ok: (a: BuiltApp) => void; no: (e: Error) => void; signal: AbortSignal }
  >();
  const started: string[] = [];
  return {
    started,
    keyOf: (ws: string, digest: string) => `${ws}-${digest}`,
    build(ws: string, digest: string, signal: AbortSignal) {
      const key = `${ws}-${digest}`;
      started.push(key);
      return new Promise<BuiltApp>((ok, no) => {
        pending.set(key, { ok, no, signal });
        signal.addEventListener('abort', () => no(signal.reason));
      });
    },
    finish(key: string) {
      pending.get(key)?.ok({ key, dir: `/apps/${key}`, plan: { start: 'x' } as never, cached: false });
    },
    aborted: (key: string) => pending.get(key)?.signal.aborted === true,
  };
}

const owner = (workspace: string, name: string): ResourceKey => ({
  kind: 'Agent',
  workspace,
  parent: '',
  name,
});
const tick = () => new Promise((r) => setImmediate(r));

describe('build steps', () => {
  it('shares one build among the objects asking for it and tells each its outcome once', async () => {
    const builder = standIn();
    const steps = new BuildSteps({ builder });
    const woken: string[] = [];
    steps.onChange((k) => woken.push(k.name));
    assert.equal(steps.request(owner('ws', 'a'), 'd1', undefined).state, 'running');
    assert.equal(steps.request(owner('ws', 'b'), 'd1', undefined).state, 'running');
    assert.deepEqual(builder.started, ['ws-d1'], 'one build');
    assert.deepEqual(woken, ['a'], 'woken when it started');
    builder.finish('ws-d1');
    await tick();
    await tick();
    assert.deepEqual(woken.slice(1).sort(), ['a', 'b'], 'both woken when it ended');
    assert.equal(steps.outcome(owner('ws', 'a'), 'ws-d1')?.state, 'built');
    assert.equal(steps.outcome(owner('ws', 'a'), 'ws-d1'), undefined, 'told once');
    assert.equal(steps.request(owner('ws', 'b'), 'd1', undefined).state, 'built');
  });

  it("holds builds back past the server's bound and the workspace's quota, and starts them in order", async () => {
    const builder = standIn();
    const store = new SqliteStore(':memory:');
    const quota = new QuotaLedger(store, {
      memoryMb: 100_000,
      sandboxes: 10,
      replicas: 10,
      builds: 1,
      jobTasks: 1,
    });
    await quota.start();
    const steps = new BuildSteps({ builder, quota, concurrency: 2 });
    const woken: string[] = [];
    steps.onChange((k) => woken.push(k.name));
    assert.equal(steps.request(owner('one', 'a'), 'd', undefined).state, 'running');
    const held = steps.request(owner('one', 'b'), 'e', undefined);
    assert.equal(held.state, 'waiting');
    assert.match((held as { quota?: string }).quota ?? '', /build/, 'the quota says which');
    assert.equal(
      steps.request(owner('two', 'c'), 'd', undefined).state,
      'running',
      'another workspace builds',
    );
    assert.deepEqual(
      steps.request(owner('three', 'x'), 'd', undefined),
      { state: 'waiting' },
      "the server's bound",
    );
    builder.finish('one-d');
    await tick();
    await tick();
    assert.deepEqual(
      builder.started,
      ['one-d', 'two-d', 'one-e'],
      'the first waiting one whose quota allows it',
    );
    assert.ok(woken.includes('b'), 'woken when its build starts');
    builder.finish('two-d');
    await tick();
    await tick();
    assert.deepEqual(builder.started.at(-1), 'three-d');
    quota.close();
    await store.close();
  });

  it('stops a build once no object waits for it', async () => {
    const builder = standIn();
    const steps = new BuildSteps({ builder });
    steps.request(owner('ws', 'a'), 'd1', undefined);
    steps.request(owner('ws', 'b'), 'd1', undefined);
    steps.forget(owner('ws', 'a'));
    assert.equal(builder.aborted('ws-d1'), false, 'b still waits');
    // b asks for another source: d1's build has no one left.
    steps.request(owner('ws', 'b'), 'd2', undefined);
    assert.equal(builder.aborted('ws-d1'), true);
    await steps.stop();
    assert.equal(builder.aborted('ws-d2'), true, 'stopping the server stops the rest');
  });

  it('runs nothing, and gives the slot back, when the object is deleted while the database judges its build', async () => {
    const builder = standIn();
    let admit: (refused: undefined) => void = () => undefined;
    let released = 0;
    // A cluster's ledger (decision 092): the slot is taken here at once and judged by the database later.
    const quota = {
      take: () => ({
        release: () => {
          released++;
        },
        admitted: new Promise<undefined>((r) => {
          admit = r;
        }),
      }),
    };
    const steps = new BuildSteps({ builder, quota: quota as never });
    assert.equal(steps.request(owner('ws', 'a'), 'd1', undefined).state, 'waiting');
    steps.forget(owner('ws', 'a'));
    admit(undefined);
    await tick();
    await tick();
    assert.deepEqual(builder.started, [], 'no build for an object deleted meanwhile');
    assert.equal(released, 1, 'the slot the database granted is given back');
    await steps.stop();
  });
});
