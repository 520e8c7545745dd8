// The activator against the fake runtime: one wake shared by concurrent requests, the bounded hold queue, a
// freeze called off by an arriving request, a failed thaw, and the standby/wake log lines.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { Pool } from 'undici';
import { ApiError } from '../errors.js';
import { FakeDriver } from '../runtime/fake.js';
import { Activator, HOLD_FULL_RETRY_AFTER_S } from './activator.js';
import type { Target } from './targets.js';
import { smallSandboxSpec } from '../test-support/sandbox-spec.js';

const SPEC = smallSandboxSpec();

/** A runtime whose thaw waits until the test opens `gate` (or fails when told to). */
class SlowThaw extends FakeDriver {
  thaws = 0;
  fail = false;
  private open!: () => void;
  gate = new Promise<void>((r) => {
    this.open = r;
  });
  release() {
    this.open();
  }
  override async thaw(id: string): Promise<void> {
    this.thaws++;
    await this.gate;
    if (this.fail) throw new Error('cgroup write refused');
    return super.thaw(id);
  }
}

function logged() {
  const lines: any[] = [];
  const stream = new PassThrough();
  stream.on('data', (c: Buffer) => {
    for (const l of c.toString().split('\n')) if (l) lines.push(JSON.parse(l));
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

async function setup(opts: { frozen: boolean; maxHeld?: number }) {
  const driver = new SlowThaw();
  const id = 'ws.box';
  await driver.ensure(id, SPEC);
  if (opts.frozen) await driver.freeze(id);
  const t: Target = {
    key: { kind: 'Sandbox', workspace: 'ws', parent: '', name: 'box' },
    id,
    // Never used: nothing is forwarded here.
    conn: {
      pool: new Pool('http://sandbox'),
      socketPath: '/nonexistent',
      address: '10.0.0.1',
      ports: new Map(),
    },
    loaded: { frozen: opts.frozen, lastUsedMs: 1_000 },
    status: 'DEPLOYED',
    evicted: false,
    recordsUsage: true,
  };
  let clock = 1_000;
  const changes: Target[] = [];
  const log = logged();
  const activator = new Activator({
    driver,
    logger: log.logger,
    onStateChange: (x) => changes.push(x),
    now: () => clock,
    maxHeld: opts.maxHeld,
  });
  return { driver, t, activator, changes, lines: log.lines, tick: (ms: number) => (clock += ms) };
}

test('concurrent requests to a frozen sandbox share one thaw and all go on once it runs', async () => {
  const { driver, t, activator, changes } = await setup({ frozen: true });
  const waits = Array.from({ length: 5 }, () => activator.enter(t));
  assert.ok(
    waits.every((w) => w instanceof Promise),
    'every request is held',
  );
  driver.release();
  await Promise.all(waits);
  assert.equal(driver.thaws, 1);
  assert.equal((await driver.inspect(t.id))?.state, 'running');
  assert.deepEqual(activator.view(t), {
    frozen: false,
    transitioning: false,
    inflight: 5,
    lastUsedMs: 1_000,
  });
  assert.equal(changes.length, 1, 'the wake is recorded once');
  assert.equal(activator.enter(t), undefined, 'a running sandbox takes the fast path');
});

test('beyond the hold bound a request is turned away with 503 and Retry-After, not counted', async () => {
  const { driver, t, activator } = await setup({ frozen: true, maxHeld: 2 });
  const held = [activator.enter(t), activator.enter(t)];
  await assert.rejects(activator.enter(t)!, (err: ApiError) => {
    assert.equal(err.status, 503);
    assert.equal(err.headers['retry-after'], String(HOLD_FULL_RETRY_AFTER_S));
    return true;
  });
  assert.equal(activator.view(t).inflight, 2);
  driver.release();
  await Promise.all(held);
  assert.equal(activator.enter(t), undefined, 'once awake, requests pass again');
});

test('a request arriving during a freeze calls it off and goes on without a thaw of its own', async () => {
  const { driver, t, activator, tick } = await setup({ frozen: false });
  driver.release();
  tick(60_000);
  let probe!: (idle: boolean) => void;
  let seen: AbortSignal | undefined;
  const standby = activator.standby(t, (signal) => {
    seen = signal;
    return new Promise((r) => {
      probe = r;
    });
  });
  await new Promise((r) => setImmediate(r));
  assert.equal(activator.view(t).transitioning, true);
  const wait = activator.enter(t);
  assert.ok(wait instanceof Promise, 'the request waits for the freeze under way');
  assert.equal(seen?.aborted, true, 'the freeze was told to stop');
  probe(true);
  assert.equal(await standby, false);
  await wait;
  assert.equal((await driver.inspect(t.id))?.state, 'running');
  assert.deepEqual(activator.view(t), {
    frozen: false,
    transitioning: false,
    inflight: 1,
    lastUsedMs: 61_000,
  });
  assert.equal(driver.thaws, 0, 'nothing was frozen, so nothing was thawed');
});

test('a thaw that fails answers 502 and leaves nothing counted', async () => {
  const { driver, t, activator } = await setup({ frozen: true });
  driver.fail = true;
  driver.release();
  await assert.rejects(activator.enter(t)!, (err: ApiError) => err instanceof ApiError && err.status === 502);
  assert.equal(activator.view(t).inflight, 0);
  assert.equal(activator.view(t).frozen, true);
});

test('standby and wake are logged with the workspace, the name, the idle time and the wake time', async () => {
  const { driver, t, activator, tick, lines } = await setup({ frozen: false });
  driver.release();
  tick(15_000);
  assert.equal(await activator.standby(t, async () => true), true);
  assert.equal((await driver.inspect(t.id))?.state, 'frozen');
  await activator.enter(t);
  await new Promise((r) => setImmediate(r));
  const standby = lines.find((l) => l.msg === 'sandbox standby');
  const woken = lines.find((l) => l.msg === 'sandbox woken');
  assert.deepEqual([standby?.workspace, standby?.name, standby?.idleMs], ['ws', 'box', 15_000]);
  assert.deepEqual([woken?.workspace, woken?.name, woken?.wakeMs], ['ws', 'box', 0]);
});

test('a freeze the daemon vetoes (keepAlive) or that finds the entry evicted leaves the sandbox running', async () => {
  const { driver, t, activator } = await setup({ frozen: false });
  driver.release();
  assert.equal(await activator.standby(t, async () => false), false);
  const gone = { ...t, evicted: true };
  assert.equal(await activator.standby(gone, async () => true), false);
  assert.equal((await driver.inspect(t.id))?.state, 'running');
});
