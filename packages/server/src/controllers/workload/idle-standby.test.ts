// Scale to zero with the last replica kept frozen (decision 090), through the scaler with an injected clock, the fake
// runtime and its stand-in daemons, and a freeze handed in as the gateway's would be: the last idle replica is frozen
// and kept (not counted as serving), a request wakes the same replica, the retention's end removes it, retention 0 or
// no freezer removes it as before, a redeploy or a changed spec removes it, and it gives its quota slot up to a
// replica another workload of its workspace must start (never to another workspace's).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import type { QuotaLimits } from '../../config.js';
import { SecretBox } from '../../crypto/secret-box.js';
import { agent } from '../../kinds/agent.js';
import { Instances } from '../../runtime/instances.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { DaemonDriver } from '../../test-support/fake-daemon.js';
import { workloadEvent } from '../core/events.js';
import { QuotaLedger } from '../core/quota-ledger.js';
import { IdleStandby, keptInStandby } from './idle-standby.js';
import { type Replica, ReplicaSet, type RevisionRun, type Workload } from './replicas.js';
import { REMOVE_AFTER_IDLE_MS, Scaler } from './scaler.js';

const RETENTION_MS = 60 * 60_000;

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

describe('scale to zero keeps the last replica frozen', () => {
  const drivers: DaemonDriver[] = [];
  const cleanup: (() => Promise<void> | void)[] = [];
  after(async () => {
    for (const c of cleanup) await c();
    for (const d of drivers) await d.close();
  });

  const setup = async (
    opts: { retentionMs?: number; canFreeze?: boolean; quota?: QuotaLedger; resources?: Resources } = {},
  ) => {
    const driver = new DaemonDriver();
    drivers.push(driver);
    const onEvent = opts.resources ? workloadEvent({ resources: opts.resources }) : undefined;
    const replicas = new ReplicaSet({ instances: new Instances({ driver }), quota: opts.quota, onEvent });
    let nowMs = 1_000_000;
    const now = () => nowMs;
    const frozen = new Set<string>();
    const standby = new IdleStandby<Replica>({
      retentionMs: opts.retentionMs ?? RETENTION_MS,
      // What the gateway's activator does: a freeze of the replica's sandbox, refused without a freezer.
      freeze: async (_w, r) => {
        if (opts.canFreeze === false) return false;
        await driver.freeze(r.id);
        frozen.add(r.id);
        return true;
      },
      onEvent,
      now,
    });
    const scaler = new Scaler({ replicas, logger: pino({ level: 'silent' }), standby, now });
    const deploy = (name = 'bot', r = run(), ws = 'ws') =>
      replicas.deploy({ workspace: ws, kind: 'Agent', name, public: false }, r);
    await deploy();
    const w = () => replicas.get('ws', 'Agent', 'bot') as Workload;
    for (const r of w().replicas) r.lastUsedMs = nowMs;
    return {
      driver,
      replicas,
      scaler,
      frozen,
      deploy,
      w,
      advance: (ms: number) => {
        nowMs += ms;
      },
      at: () => nowMs,
      /** A request as the gateway counts one: in at its start, out at its end. */
      request: (r: Replica) => {
        r.inflight++;
        r.lastUsedMs = nowMs;
        r.inflight--;
        r.lastUsedMs = nowMs;
      },
    };
  };

  it('keeps the idle last replica frozen instead of removing it, and does not count it as serving', async () => {
    const env = await setup();
    const [r] = live(env.w());
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    assert.deepEqual(live(env.w()), [r], 'the same replica is still there');
    assert.ok(env.frozen.has(r.id), 'frozen through the freeze handed in');
    assert.equal((await env.driver.inspect(r.id))?.state, 'frozen');
    assert.ok(keptInStandby(r), 'kept in standby: not serving');
    assert.equal(r.standby?.untilMs, env.at() + RETENTION_MS);
  });

  it('the next request is answered by the same replica, which serves again and is kept anew after its next idle window', async () => {
    const env = await setup();
    const [r] = live(env.w());
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    env.advance(10_000);
    assert.equal(
      env.replicas.ready(env.w(), 10),
      r,
      'the gateway picks the kept replica (its activator thaws it)',
    );
    env.request(r);
    assert.equal(keptInStandby(r), false, 'a request makes it a serving replica at once');
    await env.scaler.scaleIn();
    assert.equal(r.standby, undefined, 'the scaler clears the mark');
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    assert.ok(keptInStandby(r));
    assert.equal(
      live(env.w())[0].standby?.untilMs,
      env.at() + RETENTION_MS,
      'a new retention from the new scale to zero',
    );
  });

  it('removes it once its retention is over', async () => {
    const env = await setup();
    const [r] = live(env.w());
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    env.advance(RETENTION_MS - 1);
    await env.scaler.scaleIn();
    assert.deepEqual(live(env.w()), [r]);
    env.advance(1);
    await env.scaler.scaleIn();
    assert.deepEqual(live(env.w()), [], 'removed');
    assert.equal(r.gone, true);
    assert.equal(await env.driver.inspect(r.id), undefined, 'its sandbox is gone');
  });

  it('retention 0, or a host that cannot freeze, removes it as before', async () => {
    for (const opts of [{ retentionMs: 0 }, { canFreeze: false }]) {
      const env = await setup(opts);
      env.advance(REMOVE_AFTER_IDLE_MS);
      await env.scaler.scaleIn();
      assert.deepEqual(live(env.w()), [], JSON.stringify(opts));
    }
  });

  it('only the last replica is kept; those above it go at their idle window', async () => {
    const env = await setup();
    env.replicas.scaleOut(env.w(), 2);
    for (let i = 0; i < 200 && env.w().extraStarts > 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(live(env.w()).length, 2);
    for (const r of live(env.w())) r.lastUsedMs = env.at();
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    const left = live(env.w());
    assert.equal(left.length, 1);
    assert.ok(keptInStandby(left[0]));
  });

  it('a redeploy or a changed spec removes the kept replica: it never serves the old code or envs', async () => {
    const env = await setup();
    const [r] = live(env.w());
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    await env.deploy('bot', run({ id: 'r2' }));
    assert.equal(r.gone, true, 'the old revision went with the redeploy');
    assert.equal(await env.driver.inspect(r.id), undefined);
    assert.deepEqual(
      live(env.w()).map((x) => x.revision),
      ['r2'],
    );
    const [r2] = live(env.w());
    r2.lastUsedMs = env.at();
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    assert.ok(keptInStandby(r2));
    await env.deploy('bot', run({ id: 'r2', envs: { TOKEN: 'new' } }));
    assert.equal(r2.gone, true, 'new envs (a rotated secret) start a new replica and remove the kept one');
    assert.deepEqual(live(env.w())[0].revision, 'r2');
    assert.notEqual(live(env.w())[0].id, r2.id);
    // The same revision and spec deployed again (a periodic recheck) keeps it.
    const [r3] = live(env.w());
    r3.lastUsedMs = env.at();
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    await env.deploy('bot', run({ id: 'r2', envs: { TOKEN: 'new' } }));
    assert.deepEqual(live(env.w()), [r3]);
    assert.ok(keptInStandby(r3));
  });

  it('deleting the workload removes the kept replica', async () => {
    const env = await setup();
    const [r] = live(env.w());
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    await env.replicas.remove('ws', 'Agent', 'bot');
    assert.equal(r.gone, true);
    assert.equal(await env.driver.inspect(r.id), undefined);
  });

  it("holds its quota slot, gives it up to a start in its own workspace, never to another workspace's", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-idle-standby-'));
    const store = new SqliteStore(join(dir, 'berth.db'));
    const limits: QuotaLimits = { memoryMb: 2000, sandboxes: 10, replicas: 1, builds: 1, jobTasks: 1 };
    const ledger = new QuotaLedger(store, limits);
    await ledger.start();
    const resources = new Resources(store, [agent], new SecretBox(randomBytes(32)), { regions: ['local'] });
    cleanup.push(async () => {
      ledger.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });
    for (const [ws, name] of [
      ['ws', 'bot'],
      ['ws', 'other'],
      ['ws2', 'bot'],
    ])
      await resources.create(
        resources.kind('Agent'),
        { workspace: ws, parents: [], actor: 't' },
        { metadata: { name }, spec: {} },
      );
    const env = await setup({ quota: ledger, resources });
    const [r] = live(env.w());
    env.advance(REMOVE_AFTER_IDLE_MS);
    await env.scaler.scaleIn();
    assert.ok(keptInStandby(r));
    assert.equal(
      ledger.usage('ws').replicas,
      1,
      'a kept replica holds its slot, as a sandbox in standby does',
    );
    await env.deploy('bot', run({ id: 'q1' }), 'ws2');
    assert.ok(keptInStandby(r), "another workspace's deploy does not touch it");
    await env.deploy('other', run({ id: 'o1' }));
    assert.equal(r.gone, true, 'it gave its slot up to a replica that is to serve');
    assert.equal(ledger.usage('ws').replicas, 1);
    assert.equal(live(env.replicas.get('ws', 'Agent', 'other') as Workload).length, 1);
    await new Promise((res) => setTimeout(res, 50));
    const events = (
      (await store.get({ kind: 'Agent', workspace: 'ws', parent: '', name: 'bot' }))?.body.events ?? []
    ).map((e: { message: string }) => e.message);
    assert.ok(
      events.some((m: string) => /^scaled to zero: replica .* kept in standby/.test(m)),
      JSON.stringify(events),
    );
    assert.ok(
      events.some((m: string) => /removed from standby: its slot was needed/.test(m)),
      JSON.stringify(events),
    );
  });
});
