// The schedule runner over a real SQLite store with an injected clock; the commands go to the real sandbox API
// daemon (a child process, test-support/sandbox-daemon.ts), so "started" means a process the daemon runs.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { SecretBox } from '../crypto/secret-box.js';
import { SCHEDULE_EXECUTION_KIND, SCHEDULE_KIND, sandbox as sandboxKind } from '../kinds/sandbox.js';
import { Resources } from '../store/resources.js';
import { SqliteStore } from '../store/sqlite.js';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';
import { ScheduleRunner } from './sandbox-schedules.js';

const T0 = Date.parse('2026-06-01T08:00:00Z');
const CTX = { workspace: 'default', parents: [], actor: 'tester' };

let daemon: TestDaemon;
before(async () => {
  daemon = await startSandboxDaemon();
});
after(() => daemon?.close());

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-sched-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  let nowMs = T0;
  const resources = new Resources(store, [sandboxKind], new SecretBox(randomBytes(32)), {
    regions: ['local'],
    now: () => new Date(nowMs),
  });
  await resources.create(sandboxKind, CTX, { metadata: { name: 'box' }, spec: {} });
  const runner = () =>
    new ScheduleRunner({
      resources,
      now: () => nowMs,
      startProcess: async (_ws, _name, body) => {
        const res = await daemon.fetch('/process', { method: 'POST', json: body });
        return { statusCode: res.status, body: await res.json() };
      },
    });
  const schedule = (id: string, fields: Record<string, unknown>) =>
    store.write([
      {
        op: 'create',
        key: { kind: SCHEDULE_KIND, workspace: 'default', parent: 'box', name: id },
        body: { id, sandbox: 'box', maxExecutions: 100, createdAt: new Date(T0).toISOString(), ...fields },
      },
    ]);
  const get = async (id: string) =>
    (await store.get({ kind: SCHEDULE_KIND, workspace: 'default', parent: 'box', name: id }))?.body;
  const executions = async () =>
    (await store.list({ kind: SCHEDULE_EXECUTION_KIND, workspace: 'default', parent: 'box' })).map(
      (o) => o.body,
    );
  return {
    store,
    resources,
    runner,
    schedule,
    get,
    executions,
    set: (ms: number) => {
      nowMs = ms;
    },
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('an at schedule fires once when due: the daemon runs its command, an execution says so, and it is removed', async () => {
  const env = await setup();
  try {
    const at = new Date(T0 + 60_000).toISOString();
    await env.schedule('once', {
      type: 'at',
      value: at,
      nextAt: at,
      input: { command: 'echo scheduled', name: 'sched-once' },
    });
    const r = env.runner();
    assert.equal(await r.tick(), T0 + 60_000, 'not due yet: the pass names when it is');
    assert.deepEqual(await env.executions(), []);
    env.set(T0 + 60_500);
    await r.tick();
    const [e] = await env.executions();
    assert.equal(e.status, 'succeeded');
    assert.equal(e.statusCode, 200);
    assert.equal(e.processName, 'sched-once');
    assert.equal(e.scheduleId, 'once');
    const p = await (await daemon.fetch('/process/sched-once')).json();
    assert.equal(p.command, 'echo scheduled');
    assert.equal(
      await env.get('once'),
      undefined,
      'a one-off that fired is no longer listed, as the service does',
    );
    env.set(T0 + 120_000);
    await r.tick();
    assert.equal((await env.executions()).length, 1, 'an at schedule never fires twice');
  } finally {
    await env.close();
  }
});

test('a cron schedule whose firings were missed while the server was down fires once at start, then on time', async () => {
  const env = await setup();
  try {
    // Due every minute since 07:00; the server comes back at 08:00:30.
    await env.schedule('minutely', {
      type: 'cron',
      value: '* * * * *',
      nextAt: '2026-06-01T07:00:00.000Z',
      input: { command: 'true', name: 'tick' },
    });
    env.set(T0 + 30_000);
    const restarted = env.runner();
    const next = await restarted.tick();
    assert.equal((await env.executions()).length, 1, 'sixty missed firings make one');
    assert.equal(next, Date.parse('2026-06-01T08:01:00Z'));
    assert.equal((await env.get('minutely'))?.nextAt, '2026-06-01T08:01:00.000Z');
    env.set(Date.parse('2026-06-01T08:01:00Z'));
    await restarted.tick();
    assert.equal((await env.executions()).length, 2);
  } finally {
    await env.close();
  }
});

test('a schedule of a sandbox that is being deleted records a failed execution naming it', async () => {
  const env = await setup();
  try {
    await env.resources.delete(sandboxKind, CTX, 'box');
    const at = new Date(T0).toISOString();
    await env.schedule('late', { type: 'at', value: at, nextAt: at, input: { command: 'true' } });
    await env.runner().tick();
    const [e] = await env.executions();
    assert.equal(e.status, 'failed');
    assert.equal(e.statusCode, 0);
    assert.match(e.error, /sandbox "box" is not running/);
  } finally {
    await env.close();
  }
});

test('only the newest maxExecutions executions of a schedule are kept, listed newest first', async () => {
  const env = await setup();
  try {
    await env.schedule('kept', {
      type: 'cron',
      value: '* * * * *',
      nextAt: new Date(T0).toISOString(),
      maxExecutions: 2,
      input: { command: 'true', name: 'kept-proc' },
    });
    const r = env.runner();
    for (let i = 0; i < 3; i++) {
      env.set(T0 + i * 60_000);
      await r.tick();
    }
    const all = await env.executions();
    assert.deepEqual(
      all.map((e) => e.executedAt),
      [new Date(T0 + 120_000).toISOString(), new Date(T0 + 60_000).toISOString()],
    );
  } finally {
    await env.close();
  }
});
