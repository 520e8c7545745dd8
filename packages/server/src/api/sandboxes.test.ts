// The wait behind POST /v0/sandboxes, over a real SQLite store: settled by a later write, or not within the bound.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SqliteStore } from '../store/sqlite.js';
import { waitSettled } from './sandboxes.js';

async function withStore(fn: (store: SqliteStore) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-wait-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  try {
    await fn(store);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const key = { kind: 'Sandbox', workspace: 'default', parent: '', name: 'box' };

test('a create waits until its sandbox leaves DEPLOYING, and answers what the store then holds', async () => {
  await withStore(async (store) => {
    await store.write([{ op: 'create', key, body: { status: 'DEPLOYING' } }]);
    const waiting = waitSettled(store, key, 10_000);
    await store.write([{ op: 'update', key, body: { status: 'DEPLOYING', note: 'still' } }]);
    await store.write([{ op: 'update', key, body: { status: 'DEPLOYED', state: 'RUNNING' } }]);
    const { object, settled } = await waiting;
    assert.equal(settled, true);
    assert.equal(object?.body.status, 'DEPLOYED');
    assert.equal(object?.body.state, 'RUNNING');
  });
});

test('past the bound it answers the object as it is, not settled (the API turns that into a 504)', async () => {
  await withStore(async (store) => {
    await store.write([{ op: 'create', key, body: { status: 'DEPLOYING' } }]);
    const { object, settled } = await waitSettled(store, key, 30);
    assert.equal(settled, false);
    assert.equal(object?.body.status, 'DEPLOYING');
  });
});

test('an object already settled, or deleted meanwhile, ends the wait at once', async () => {
  await withStore(async (store) => {
    await store.write([{ op: 'create', key, body: { status: 'FAILED' } }]);
    assert.equal((await waitSettled(store, key, 10_000)).object?.body.status, 'FAILED');
    await store.write([{ op: 'update', key, body: { status: 'DEPLOYING' } }]);
    const waiting = waitSettled(store, key, 10_000);
    await store.write([{ op: 'delete', key }]);
    const gone = await waiting;
    assert.equal(gone.settled, true);
    assert.equal(gone.object, undefined);
  });
});
