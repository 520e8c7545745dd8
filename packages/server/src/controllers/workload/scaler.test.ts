// The scaler applies the KPA's decisions to the replica set from the load the gateway reports, with an injected clock:
// requests in flight past the target concurrency (waiting ones too) start replicas, never past maxScale; a replica
// idle for the removal delay goes while more than minScale run, one in use never.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Instances } from '../../runtime/instances.js';
import { DaemonDriver } from '../../test-support/fake-daemon.js';
import { ReplicaSet, type RevisionRun, type Workload } from './replicas.js';
import { REMOVE_AFTER_IDLE_MS, Scaler, TARGET_CONCURRENCY } from './scaler.js';

const run = (over: Partial<RevisionRun> = {}): RevisionRun => ({
  id: 'r1',
  appDir: '/nonexistent/app',
  start: 'node app.js',
  memoryMb: 256,
  envs: {},
  minScale: 0,
  maxScale: 3,
  volumes: [],
  ...over,
});
const live = (w: Workload) => w.replicas.filter((r) => !r.gone);
const settle = async (w: Workload) => {
  for (let i = 0; i < 200 && w.extraStarts > 0; i++) await new Promise((r) => setTimeout(r, 5));
};

describe('the scaler', () => {
  const drivers: DaemonDriver[] = [];
  after(async () => {
    for (const d of drivers) await d.close();
  });
  const setup = async (r: RevisionRun) => {
    const driver = new DaemonDriver();
    drivers.push(driver);
    const replicas = new ReplicaSet({ instances: new Instances({ driver }) });
    await replicas.deploy({ workspace: 'ws', kind: 'Agent', name: 'bot', public: false }, r);
    let nowMs = 1_000_000;
    const scaler = new Scaler({ replicas, logger: pino({ level: 'silent' }), now: () => nowMs });
    return {
      scaler,
      w: () => replicas.get('ws', 'Agent', 'bot') as Workload,
      advance: (ms: number) => {
        nowMs += ms;
      },
      at: () => nowMs,
    };
  };

  it('starts replicas for the load reported, waiting requests included, up to maxScale', async () => {
    const env = await setup(run());
    const w = env.w();
    w.replicas[0].inflight = TARGET_CONCURRENCY;
    w.waiting = 2 * TARGET_CONCURRENCY;
    env.scaler.autoscale();
    await settle(w);
    assert.equal(live(w).length, 3, 'three targets worth of load, within maxScale 3');
    w.waiting = 10 * TARGET_CONCURRENCY;
    env.scaler.autoscale();
    await settle(w);
    assert.equal(live(w).length, 3, 'never past maxScale');
  });

  it('removes a replica idle for the removal delay above minScale, never one in use', async () => {
    const env = await setup(run({ minScale: 1 }));
    const w = env.w();
    w.waiting = TARGET_CONCURRENCY * 2;
    env.scaler.autoscale();
    await settle(w);
    w.waiting = 0;
    const [a, b] = live(w);
    for (const r of [a, b]) r.lastUsedMs = env.at();
    b.inflight = 1;
    env.advance(REMOVE_AFTER_IDLE_MS - 1);
    await env.scaler.scaleIn();
    assert.equal(live(w).length, 2, 'not idle long enough');
    env.advance(1);
    await env.scaler.scaleIn();
    assert.deepEqual(live(w), [b], 'the idle one went; the one in use stays');
    b.inflight = 0;
    await env.scaler.scaleIn();
    assert.deepEqual(live(w), [b], 'minScale 1 is kept');
  });
});
