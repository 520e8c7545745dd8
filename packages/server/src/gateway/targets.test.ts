// The gateway's table follows a real SQLite store: a sandbox becomes an entry when it is DEPLOYED and the runtime
// runs it, and leaves the table (its pools closed) when deleted or deactivated.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { FakeDriver } from '../runtime/fake.js';
import { sandboxId } from '../runtime/sandbox-id.js';
import { SqliteStore } from '../store/sqlite.js';
import type { ResourceKey } from '../store/store.js';
import { Targets } from './targets.js';
import { smallSandboxSpec } from '../test-support/sandbox-spec.js';

const SPEC = smallSandboxSpec();
const key = (name: string): ResourceKey => ({ kind: 'Sandbox', workspace: 'ws', parent: '', name });
const body = (name: string, status: string) => ({ metadata: { name }, spec: {}, status, events: [] });

/** Waits until `pred` holds, yielding to the store watch and the loads it starts. */
async function until(pred: () => boolean, what: string) {
  for (let i = 0; i < 500 && !pred(); i++) await new Promise((r) => setTimeout(r, 2));
  assert.ok(pred(), what);
}

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-targets-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const driver = new FakeDriver();
  const targets = new Targets({ store, driver, logger: pino({ level: 'silent' }), now: () => 42 });
  return {
    store,
    driver,
    targets,
    async close() {
      await targets.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('deployed sandboxes are loaded at start, frozen ones as frozen; others are not', async () => {
  const { store, driver, targets, close } = await setup();
  try {
    await driver.ensure(sandboxId('ws', 'a'), SPEC);
    await driver.ensure(sandboxId('ws', 'b'), SPEC);
    await driver.freeze(sandboxId('ws', 'b'));
    await store.write([
      { op: 'create', key: key('a'), body: body('a', 'DEPLOYED') },
      { op: 'create', key: key('b'), body: { ...body('b', 'DEPLOYED'), state: 'STANDBY' } },
      { op: 'create', key: key('c'), body: body('c', 'DEPLOYING') },
    ]);
    await targets.start();
    assert.equal(targets.get('ws', 'a')?.loaded.frozen, false);
    assert.deepEqual(targets.get('ws', 'b')?.loaded, {
      frozen: true,
      lastUsedMs: 42,
      storedState: 'STANDBY',
    });
    assert.equal(targets.get('ws', 'c'), undefined);
  } finally {
    await close();
  }
});

test('a sandbox that becomes DEPLOYED is loaded; a delete evicts it and closes its pool', async () => {
  const { store, driver, targets, close } = await setup();
  try {
    await targets.start();
    await driver.ensure(sandboxId('ws', 'box'), SPEC);
    await store.write([{ op: 'create', key: key('box'), body: body('box', 'DEPLOYING') }]);
    assert.equal(targets.get('ws', 'box'), undefined, 'not while DEPLOYING');
    await store.write([{ op: 'update', key: key('box'), body: body('box', 'DEPLOYED') }]);
    await until(() => targets.get('ws', 'box') !== undefined, 'loaded once DEPLOYED');
    const t = targets.get('ws', 'box')!;
    assert.equal(t.status, 'DEPLOYED');
    assert.equal(t.conn.socketPath, driver.socketPath(t.id));

    await store.write([{ op: 'update', key: key('box'), body: body('box', 'DELETING') }]);
    assert.equal(targets.get('ws', 'box'), undefined, 'evicted at once by the watch');
    assert.equal(t.evicted, true);
    assert.equal(t.conn.pool.closed, true);
    await assert.rejects(targets.resolve('ws', 'box'), /being deleted/);

    await store.write([{ op: 'delete', key: key('box') }]);
    await assert.rejects(targets.resolve('ws', 'box'), /not found/);
  } finally {
    await close();
  }
});

test('a sandbox started again at another address is reached there, never at the old one (another sandbox may hold it now)', async () => {
  const { store, driver, targets, close } = await setup();
  try {
    await targets.start();
    const id = sandboxId('ws', 'web');
    await driver.ensure(id, SPEC);
    await store.write([{ op: 'create', key: key('web'), body: body('web', 'DEPLOYED') }]);
    await until(() => targets.get('ws', 'web') !== undefined, 'loaded once DEPLOYED');
    const before = targets.get('ws', 'web')!;
    // Its daemon died: the controller says DEPLOYING, the runtime starts a fresh instance (a new slot, a new
    // address), and the controller says DEPLOYED again.
    await store.write([{ op: 'update', key: key('web'), body: body('web', 'DEPLOYING') }]);
    await driver.remove(id);
    await driver.ensure(sandboxId('ws', 'other'), SPEC); // takes the freed address
    await driver.ensure(id, SPEC);
    const now = (await driver.inspect(id))!.address;
    assert.notEqual(now, before.conn.address, 'the fresh instance has another address');
    await store.write([{ op: 'update', key: key('web'), body: body('web', 'DEPLOYED') }]);
    await until(() => targets.get('ws', 'web')?.conn.address === now, 'the entry follows the new instance');
    assert.equal(before.evicted, true, 'the old entry is dropped');
    assert.equal(before.conn.pool.closed, true, 'and its pools closed');
  } finally {
    await close();
  }
});

test('a sandbox the runtime does not run is not an entry: the caller is told it does not serve', async () => {
  const { store, targets, close } = await setup();
  try {
    await targets.start();
    await store.write([{ op: 'create', key: key('ghost'), body: body('ghost', 'DEPLOYED') }]);
    await assert.rejects(targets.resolve('ws', 'ghost'), (err: any) => err.status === 503);
  } finally {
    await close();
  }
});
