// The sandbox controller's transitions over a real SQLite store and resource pipeline, with the sanctioned
// fake runtime (runtime/fake.ts) and an injected clock. The daemon's /health is a real HTTP server on a unix
// socket, so the controller's own health probe runs unchanged.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { SecretBox } from '../../crypto/secret-box.js';
import { sandbox as sandboxKind } from '../../kinds/sandbox.js';
import type { SandboxInfo, SandboxSpec } from '../../runtime/driver.js';
import { FakeDriver } from '../../runtime/fake.js';
import { Instances } from '../../runtime/instances.js';
import { ImageStore } from '../../runtime/images/image-store.js';
import { sandboxId } from '../../runtime/sandbox-id.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { ControllerManager } from '../core/manager.js';
import { DONE, TerminalError } from '../core/reconciler.js';
import { runtimeSpecOf } from './sandbox-spec.js';
import { DEFAULT_TERMINATED_RETENTION, LIVE_RECHECK_MS, sandboxReconciler } from './sandbox.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');
const CTX = { workspace: 'default', parents: [], actor: 'tester' };
const RETENTION_MS = 5 * 60_000;

/** FakeDriver whose sockets are one real /health server, and whose ensure a test can hold or fail. */
class TestDriver extends FakeDriver {
  /** Runs inside ensure, before it returns (a slow start, or a failing one when it throws). */
  during?: () => Promise<void> | void;
  ensures = 0;
  constructor(
    now: () => Date,
    private readonly socket: string,
  ) {
    super(now);
  }
  override socketPath(): string {
    return this.socket;
  }
  /** Live instances whose start a killed server left unfinished (as the Linux driver reports them). */
  readonly unfinished = new Set<string>();
  override async ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo> {
    this.ensures++;
    await this.during?.();
    // As the Linux driver does: an unfinished instance is replaced, never adopted.
    if (this.unfinished.delete(id)) await super.remove(id);
    return super.ensure(id, spec);
  }
  override async inspect(id: string): Promise<SandboxInfo | undefined> {
    const info = await super.inspect(id);
    return info && this.unfinished.has(id) ? { ...info, unfinished: true } : info;
  }
}

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-sbx-ctl-'));
  const socket = join(dir, 'health.sock');
  const health: Server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ status: 'ok', activeKeepAlive: 0 }));
  });
  await new Promise<void>((r) => health.listen(socket, r));
  let nowMs = T0;
  const now = () => new Date(nowMs);
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [sandboxKind], new SecretBox(randomBytes(32)), {
    regions: ['local'],
    now,
  });
  const lines: any[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(JSON.parse(String(chunk)));
        cb();
      },
    }),
  );
  const driver = new TestDriver(now, socket);
  const images = new ImageStore({ dataDir: dir });
  const instances = new Instances({ driver });
  const reconciler = sandboxReconciler({ resources, now, instances, logger, images });
  const key = (name: string) => ({ kind: 'Sandbox', workspace: 'default', parent: '', name });
  return {
    resources,
    store,
    driver,
    logger,
    reconciler,
    key,
    lines,
    advance(ms: number) {
      nowMs += ms;
    },
    create: (name: string, spec: object = {}) =>
      resources.create(sandboxKind, CTX, { metadata: { name }, spec }),
    reconcile: (name: string) => reconciler.reconcile(key(name), new AbortController().signal),
    get: async (name: string): Promise<any> => (await store.get(key(name)))?.body,
    async close() {
      await store.close();
      await new Promise((r) => health.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Holds the driver's next ensure: `inEnsure` settles once a start is inside it, `finish` lets it go on. */
function holdEnsure(driver: TestDriver) {
  let finish!: () => void;
  const inEnsure = new Promise<void>((entered) => {
    driver.during = () => {
      entered();
      return new Promise<void>((r) => {
        finish = r;
      });
    };
  });
  return { inEnsure, finish: () => finish() };
}

const steps = (b: any) => b.events.map((e: any) => e.status);
const logged = (lines: any[], msg: string) => lines.filter((l) => l.msg === msg);

test('a new sandbox goes DEPLOYING then DEPLOYED with state RUNNING, and the start time is logged', async () => {
  const env = await setup();
  try {
    await env.create('box');
    env.driver.during = () => env.advance(1_500);
    assert.deepEqual(await env.reconcile('box'), { requeueAfterMs: LIVE_RECHECK_MS });
    const b = await env.get('box');
    assert.equal(b.status, 'DEPLOYED');
    assert.equal(b.state, 'RUNNING');
    assert.deepEqual(steps(b), ['DEPLOYING', 'DEPLOYED']);
    assert.equal((await env.driver.inspect(sandboxId('default', 'box')))?.state, 'running');
    const [line, ...more] = logged(env.lines, 'sandbox deployed');
    assert.equal(more.length, 0);
    assert.deepEqual([line.level, line.workspace, line.name, line.ms], [30, 'default', 'box', 1_500]);
    // A second reconcile of a live, deployed sandbox changes nothing.
    const rv = (await env.store.get(env.key('box')))!.resourceVersion;
    await env.reconcile('box');
    assert.equal((await env.store.get(env.key('box')))!.resourceVersion, rv);
    assert.equal(env.driver.ensures, 1);
  } finally {
    await env.close();
  }
});

test('a start that fails is a terminal error, recorded as FAILED with the reason, and nothing is left running', async () => {
  const env = await setup();
  const manager = new ControllerManager({
    resources: env.resources,
    now: () => new Date(),
    logger: pino({ level: 'silent' }),
    reconcilers: new Map([['Sandbox', env.reconciler]]),
  });
  try {
    env.driver.during = () => {
      throw new Error('no space left for the writable layer');
    };
    await env.create('bad');
    await assert.rejects(
      env.reconcile('bad'),
      (e) => e instanceof TerminalError && /no space left/.test(e.message),
    );
    assert.equal(await env.driver.inspect(sandboxId('default', 'bad')), undefined);
    // Through the manager, as the server runs it: FAILED with the reason, once.
    manager.start();
    let b: any;
    for (let i = 0; i < 2000 && b?.status !== 'FAILED'; i++) {
      await new Promise((r) => setTimeout(r, 5));
      b = await env.get('bad');
    }
    assert.equal(b.status, 'FAILED');
    assert.match(b.events.at(-1).message, /^the sandbox could not start: no space left/);
    assert.equal(await env.reconcile('bad'), DONE, 'FAILED stays until the spec changes');
  } finally {
    await manager.stop();
    await env.close();
  }
});

test('enabled false goes DEACTIVATING then DEACTIVATED and the runtime no longer holds the sandbox', async () => {
  const env = await setup();
  try {
    await env.create('off');
    await env.reconcile('off');
    await env.resources.replace(sandboxKind, CTX, 'off', {
      metadata: { name: 'off' },
      spec: { enabled: false },
    });
    assert.equal(await env.reconcile('off'), DONE);
    const b = await env.get('off');
    assert.equal(b.status, 'DEACTIVATED');
    assert.deepEqual(steps(b).slice(-2), ['DEACTIVATING', 'DEACTIVATED']);
    assert.equal(b.state, undefined, 'a removed sandbox has no run state');
    assert.equal(await env.driver.inspect(sandboxId('default', 'off')), undefined);
    assert.equal(logged(env.lines, 'sandbox deactivated').length, 1);
    assert.equal(logged(env.lines, 'sandbox deactivated')[0].name, 'off');
  } finally {
    await env.close();
  }
});

test('a sandbox its expiry ended is TERMINATED, kept for the retention, then its record is removed', async () => {
  const env = await setup();
  try {
    await env.create('gone', { runtime: { ttl: '1m' } });
    env.driver.during = () => env.advance(90_000);
    await env.reconcile('gone');
    env.driver.during = undefined;
    assert.equal(
      (await env.get('gone')).readyAt,
      new Date(T0 + 90_000).toISOString(),
      'its age counts from here',
    );
    env.advance(60_000);
    // What the expiry sweep does once the ttl, counted from readyAt, is up.
    await env.resources.delete(sandboxKind, CTX, 'gone');
    assert.deepEqual(await env.reconcile('gone'), { requeueAfterMs: RETENTION_MS });
    assert.equal(DEFAULT_TERMINATED_RETENTION, '5m');
    const b = await env.get('gone');
    assert.equal(b.status, 'TERMINATED');
    assert.equal(b.state, undefined);
    assert.deepEqual(steps(b).slice(-2), ['DELETING', 'TERMINATED']);
    assert.equal(await env.driver.inspect(sandboxId('default', 'gone')), undefined);
    assert.equal(logged(env.lines, 'sandbox terminated').length, 1);
    env.advance(RETENTION_MS - 1_000);
    assert.deepEqual(await env.reconcile('gone'), { requeueAfterMs: 1_000 });
    assert.ok(await env.get('gone'), 'kept while the retention lasts');
    env.advance(1_000);
    assert.equal(await env.reconcile('gone'), DONE);
    assert.equal(await env.get('gone'), undefined, 'removed once the retention has passed');
    assert.equal(logged(env.lines, 'sandbox terminated').length, 1, 'logged once');
  } finally {
    await env.close();
  }
});

test('a sandbox deleted before its time is removed once TERMINATED; one with a terminatedRetention keeps it that long', async () => {
  const env = await setup();
  try {
    await env.create('asked', { runtime: { ttl: '1h' } });
    await env.create('kept', { lifecycle: { terminatedRetention: '30s' } });
    for (const n of ['asked', 'kept']) {
      await env.reconcile(n);
      await env.resources.delete(sandboxKind, CTX, n);
    }
    assert.equal(await env.reconcile('asked'), DONE);
    assert.equal(
      await env.get('asked'),
      undefined,
      'the name is free and a read is a 404, as the SDK expects',
    );
    assert.equal(await env.driver.inspect(sandboxId('default', 'asked')), undefined);
    assert.deepEqual(await env.reconcile('kept'), { requeueAfterMs: 30_000 });
    assert.equal((await env.get('kept')).status, 'TERMINATED');
  } finally {
    await env.close();
  }
});

test('a DELETE that lands while the sandbox is starting ends TERMINATED, never DEPLOYED', async () => {
  const env = await setup();
  try {
    await env.create('race', { lifecycle: { terminatedRetention: '1m' } });
    const { inEnsure, finish } = holdEnsure(env.driver);
    const first = env.reconcile('race');
    await inEnsure;
    await env.resources.delete(sandboxKind, CTX, 'race');
    finish();
    assert.equal(await first, DONE);
    assert.equal((await env.get('race')).status, 'DELETING');
    env.driver.during = undefined;
    // The reconcile the DELETE queued.
    await env.reconcile('race');
    const b = await env.get('race');
    assert.equal(b.status, 'TERMINATED');
    assert.ok(!steps(b).includes('DEPLOYED'), `steps: ${steps(b)}`);
    assert.equal(await env.driver.inspect(sandboxId('default', 'race')), undefined);
    assert.equal(logged(env.lines, 'sandbox deployed').length, 0);
  } finally {
    await env.close();
  }
});

test('a PUT of new envs that lands while the sandbox is starting is applied: the start of the old spec is not reported DEPLOYED', async () => {
  const env = await setup();
  try {
    await env.create('late', { runtime: { envs: [{ name: 'A', value: '1' }] } });
    const { inEnsure, finish } = holdEnsure(env.driver);
    const first = env.reconcile('late');
    await inEnsure;
    const cur = await env.get('late');
    await env.resources.replace(sandboxKind, CTX, 'late', {
      metadata: cur.metadata,
      spec: { ...cur.spec, runtime: { ...cur.spec.runtime, envs: [{ name: 'A', value: '2' }] } },
    });
    finish();
    await first;
    env.driver.during = undefined;
    assert.equal((await env.get('late')).status, 'DEPLOYING', "the old spec's start reports nothing");
    // The reconcile the PUT queued.
    await env.reconcile('late');
    const b = await env.get('late');
    assert.equal(b.status, 'DEPLOYED');
    assert.equal(env.driver.creations, 2, 'started again with the new envs');
    assert.match(b.events.at(-1).message, /deployed: sandbox running/);
    assert.doesNotMatch(b.events.at(-1).message, /kept as it was/);
  } finally {
    await env.close();
  }
});

test('a sandbox whose start a killed server left unfinished is started again, never adopted DEPLOYED and unreachable', async () => {
  const env = await setup();
  try {
    const o = await env.create('cut');
    const id = sandboxId('default', 'cut');
    // Launched by the server before it was killed, which died before it reached the daemon (no status written).
    await env.driver.ensure(id, runtimeSpecOf(env.resources, o.object.body.spec));
    env.driver.unfinished.add(id);
    const pid = (await env.driver.inspect(id))!.pid;
    await env.reconcile('cut');
    const b = await env.get('cut');
    assert.equal(b.status, 'DEPLOYED');
    assert.equal(env.driver.ensures, 2, 'started again');
    assert.equal(env.driver.creations, 2, 'a fresh instance');
    const info = (await env.driver.inspect(id))!;
    assert.notEqual(info.pid, pid);
    assert.equal(info.unfinished, undefined);
    assert.ok(
      b.events.some((e: any) => /start was cut short/.test(e.message)),
      'an event says why it started again',
    );
    assert.doesNotMatch(b.events.at(-1).message, /kept as it was/);
  } finally {
    await env.close();
  }
});

test('a sandbox the runtime still runs (after a server restart) is adopted, not started again', async () => {
  const env = await setup();
  try {
    const o = await env.create('kept', { runtime: { envs: [{ name: 'A', value: '1' }] } });
    const id = sandboxId('default', 'kept');
    // Started by the server before its restart, from the same spec.
    await env.driver.ensure(id, runtimeSpecOf(env.resources, o.object.body.spec));
    const pid = (await env.driver.inspect(id))!.pid;
    await env.reconcile('kept');
    const b = await env.get('kept');
    assert.equal(b.status, 'DEPLOYED');
    assert.equal(b.state, 'RUNNING');
    assert.match(b.events.at(-1).message, /kept as it was/);
    assert.equal(env.driver.ensures, 1, 'no second ensure');
    assert.equal(env.driver.creations, 1);
    assert.equal((await env.driver.inspect(id))!.pid, pid, 'the same processes');
    assert.equal(logged(env.lines, 'sandbox deployed')[0].adopted, true);
  } finally {
    await env.close();
  }
});

test('a PUT that changes the envs starts the sandbox again; one that changes anything else keeps it', async () => {
  const env = await setup();
  try {
    await env.create('envy', { runtime: { envs: [{ name: 'A', value: '1' }] } });
    await env.reconcile('envy');
    const id = sandboxId('default', 'envy');
    const first = (await env.driver.inspect(id))!;
    const put = async (spec: object) => {
      const cur = await env.get('envy');
      await env.resources.replace(sandboxKind, CTX, 'envy', {
        metadata: cur.metadata,
        spec: { ...cur.spec, ...spec },
      });
      await env.reconcile('envy');
      return env.get('envy');
    };
    const b = await put({ runtime: { ...(await env.get('envy')).spec.runtime, ttl: '1h' } });
    assert.equal(b.status, 'DEPLOYED');
    assert.equal((await env.driver.inspect(id))!.pid, first.pid, 'a ttl change keeps the processes');
    const c = await put({
      runtime: { ...(await env.get('envy')).spec.runtime, envs: [{ name: 'A', value: '2' }] },
    });
    assert.equal(c.status, 'DEPLOYED');
    const second = (await env.driver.inspect(id))!;
    assert.notEqual(second.pid, first.pid, 'new envs: a new sandbox');
    assert.notEqual(second.specHash, first.specHash);
    assert.equal(env.driver.creations, 2);
  } finally {
    await env.close();
  }
});

test('runtime fields this server cannot honour are named in an event once the sandbox runs', async () => {
  const env = await setup();
  try {
    await env.create('args', { runtime: { extraArgs: { iptables: 'enabled' }, snapshotEnabled: true } });
    await env.reconcile('args');
    const b = await env.get('args');
    assert.equal(b.status, 'DEPLOYED');
    assert.deepEqual(b.spec.runtime.extraArgs, { iptables: 'enabled' });
    assert.match(
      b.events.at(-1).message,
      /not applied: runtime.extraArgs iptables=enabled .*runtime.snapshotEnabled/,
    );
  } finally {
    await env.close();
  }
});

test('a running sandbox that dies is started again, unless the out-of-memory killer ended it: then FAILED with the figures', async () => {
  const env = await setup();
  try {
    await env.create('crashy', { runtime: { memory: 256 } });
    await env.reconcile('crashy');
    const id = sandboxId('default', 'crashy');
    env.driver.writeLog(id, '{"event":"listening"}\nFATAL: something broke\n');
    env.driver.kill(id);
    await env.reconcile('crashy');
    const again = await env.get('crashy');
    assert.equal(again.status, 'DEPLOYED');
    assert.equal(
      again.events.at(-2).message,
      'the sandbox had stopped: its API daemon ended and every process in it with it (the daemon\'s last output: "FATAL: something broke"); starting it again, fresh: its processes and the files of its writable layer are gone (volumes are kept)',
    );
    assert.equal(env.driver.creations, 2);

    env.driver.oomKill(id, 200 * 1024 * 1024);
    assert.equal(await env.reconcile('crashy'), DONE);
    const b = await env.get('crashy');
    assert.equal(b.status, 'FAILED');
    assert.equal(b.state, undefined);
    assert.match(
      b.events.at(-1).message,
      /^out of memory: the sandbox used all of its 256 MB and the kernel ended its processes \(2 killed\), the sandbox's API daemon with them; its files took 200 MB of it/,
    );
    assert.equal(await env.driver.inspect(id), undefined, 'its memory (the layer) is released');
    assert.equal(env.driver.creations, 2, 'not started again');
    assert.equal(logged(env.lines, 'sandbox ran out of memory').length, 1);
    // A spec update starts it again, fresh.
    const cur = await env.get('crashy');
    await env.resources.replace(sandboxKind, CTX, 'crashy', {
      metadata: cur.metadata,
      spec: { ...cur.spec, runtime: { ...cur.spec.runtime, envs: [{ name: 'RETRY', value: '1' }] } },
    });
    await env.reconcile('crashy');
    assert.equal((await env.get('crashy')).status, 'DEPLOYED');
    assert.equal(env.driver.creations, 3);
  } finally {
    await env.close();
  }
});
