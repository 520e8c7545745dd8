// The fault sweep over a real SQLite store and the fake runtime: a process ended by the out-of-memory killer in a
// sandbox that runs on, and a full writable layer, each leave one event in plain words; a sandbox in standby, or
// not deployed, is not looked at.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SecretBox } from '../../crypto/secret-box.js';
import { sandbox as sandboxKind } from '../../kinds/sandbox.js';
import { FakeDriver } from '../../runtime/fake.js';
import { sandboxId } from '../../runtime/sandbox-id.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { lastOutput } from '../../sandbox-api/last-output.js';
import { SandboxFaultWatch } from './sandbox-faults.js';
import { runtimeSpecOf } from './sandbox-spec.js';

const MB = 1024 * 1024;
const CTX = { workspace: 'default', parents: [], actor: 'tester' };

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-faults-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, [sandboxKind], new SecretBox(randomBytes(32)), {
    regions: ['local'],
  });
  const driver = new FakeDriver();
  const woken: string[] = [];
  const watch = new SandboxFaultWatch({ resources, driver, wake: (k) => woken.push(k.name) });
  const key = (name: string) => ({ kind: 'Sandbox', workspace: 'default', parent: '', name });
  return {
    resources,
    driver,
    watch,
    woken,
    async running(name: string) {
      await resources.create(sandboxKind, CTX, { metadata: { name }, spec: { runtime: { memory: 256 } } });
      await resources.updateStatus(key(name), { to: 'DEPLOYED', message: 'deployed' });
      const id = sandboxId('default', name);
      await driver.ensure(id, runtimeSpecOf(resources, { runtime: { memory: 256 } }));
      return id;
    },
    events: async (name: string) =>
      ((await store.get(key(name)))?.body.events ?? []).map((e: { message: string }) => e.message),
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('a process ended by the out-of-memory killer in a sandbox that runs on leaves one event with the figures', async () => {
  const env = await setup();
  try {
    const id = await env.running('hungry');
    assert.deepEqual(await env.watch.sweep(), []);
    env.driver.setStats(id, {
      oomKills: 1,
      memoryBytes: 250 * MB,
      disk: { usedBytes: 100 * MB, limitBytes: 256 * MB },
    });
    const [said] = await env.watch.sweep();
    assert.equal(
      said,
      'default/hungry: out of memory: the kernel ended a process in the sandbox (1 since it started), which had used all of its 256 MB (250 MB in use now, 100 MB of it files: what is written to /home/user, /tmp, /workspace and /var is held in memory). The sandbox and its other processes run on; give it more memory (spec.runtime.memory) or use less',
    );
    assert.deepEqual(await env.watch.sweep(), [], 'told once');
    env.driver.setStats(id, { oomKills: 3 });
    assert.match((await env.watch.sweep())[0], /the kernel ended 2 processes in the sandbox/);
    assert.equal((await env.events('hungry')).filter((m: string) => m.startsWith('out of memory')).length, 2);
  } finally {
    await env.close();
  }
});

test('a second kill with the same figures is a second event (chaos finding: the store drops an event equal to the last)', async () => {
  const env = await setup();
  try {
    const id = await env.running('again');
    await env.watch.sweep();
    for (const oomKills of [1, 2]) {
      env.driver.setStats(id, {
        oomKills,
        memoryBytes: 9 * MB,
        disk: { usedBytes: 0, limitBytes: 256 * MB },
      });
      assert.match(
        (await env.watch.sweep())[0],
        new RegExp(`ended a process in the sandbox \\(${oomKills} since`),
      );
    }
    assert.equal((await env.events('again')).filter((m: string) => m.startsWith('out of memory')).length, 2);
  } finally {
    await env.close();
  }
});

test('a sandbox first seen after the first sweep counts its kills from zero; one adopted at the first sweep does not', async () => {
  const env = await setup();
  try {
    const adopted = await env.running('adopted');
    env.driver.setStats(adopted, { oomKills: 4 });
    assert.deepEqual(await env.watch.sweep(), [], 'kills from before this server are not told');
    const fresh = await env.running('fresh');
    env.driver.setStats(fresh, { oomKills: 1 });
    assert.deepEqual(
      (await env.watch.sweep()).map((m) => m.split(':')[0]),
      ['default/fresh'],
    );
  } finally {
    await env.close();
  }
});

test('a full writable layer is said once, and again only after it was freed and filled again', async () => {
  const env = await setup();
  try {
    const id = await env.running('full');
    env.driver.setStats(id, { disk: { usedBytes: 256 * MB - 4096, limitBytes: 256 * MB } });
    const [said] = await env.watch.sweep();
    assert.equal(
      said,
      'default/full: disk full: the sandbox\'s files fill its 256 MB (/home/user, /tmp, /workspace and /var together); writes fail with "No space left on device" until files are removed. Its cap is its memory (spec.runtime.memory); a volume holds more',
    );
    assert.deepEqual(await env.watch.sweep(), []);
    env.driver.setStats(id, { disk: { usedBytes: 240 * MB, limitBytes: 256 * MB } });
    assert.deepEqual(await env.watch.sweep(), [], 'still nearly full: not told again');
    env.driver.setStats(id, { disk: { usedBytes: 256 * MB, limitBytes: 256 * MB } });
    assert.deepEqual(await env.watch.sweep(), []);
    env.driver.setStats(id, { disk: { usedBytes: 10 * MB, limitBytes: 256 * MB } });
    await env.watch.sweep();
    env.driver.setStats(id, { disk: { usedBytes: 256 * MB, limitBytes: 256 * MB } });
    assert.equal((await env.watch.sweep()).length, 1, 'freed, then full again: told again');
  } finally {
    await env.close();
  }
});

test('a sandbox in standby is not looked at', async () => {
  const env = await setup();
  try {
    const id = await env.running('asleep');
    await env.watch.sweep();
    await env.driver.freeze(id);
    env.driver.setStats(id, { oomKills: 1 });
    assert.deepEqual(await env.watch.sweep(), []);
  } finally {
    await env.close();
  }
});

test('a deployed sandbox whose processes ended with no request reaching it is handed to its controller', async () => {
  const env = await setup();
  try {
    await env.running('alive');
    const id = await env.running('gone');
    await env.watch.sweep();
    assert.deepEqual(env.woken, [], 'running: nothing to do');
    env.driver.kill(id);
    await env.watch.sweep();
    assert.deepEqual(env.woken, ['gone']);
  } finally {
    await env.close();
  }
});

test("a daemon's last output is its last lines, without its start-up line, each kept short", () => {
  assert.equal(lastOutput('{"event":"listening","socket":"/run/berth/api.sock"}\n'), undefined);
  assert.equal(lastOutput(undefined), undefined);
  assert.equal(lastOutput('a\nb\n\nc\nd\n'), 'b | c | d');
  assert.equal(lastOutput('x'.repeat(300)), `${'x'.repeat(200)}…`);
});
