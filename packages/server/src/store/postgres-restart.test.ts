// The PostgreSQL store across a database restart (decision 063): a pooled connection that a write holds between two
// of its statements when the database shuts down must not end the process — a follower of a cluster exited 1 so
// under test/cluster/flows.test.ts's database restart — and writes go on, on fresh connections, once it is back.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { wireErrorOf } from '../http/wire-error.js';
import { testPostgres } from '../test-support/store-drivers.js';
import { PostgresStore } from './postgres.js';
import { type ResourceKey, StoreUnavailableError } from './store.js';

/** Creates `key` once the database accepts writes again (tried for 5 s); fails the test if it never does. */
async function createWhenBack(store: PostgresStore, key: ResourceKey) {
  for (let i = 0; i < 50; i++) {
    const written = await store
      .write([{ op: 'create', key, body: { metadata: { name: key.name } } }])
      .then(() => true)
      .catch(() => false);
    if (written) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail('a write succeeds once the database is back');
}

describe('the PostgreSQL store when the database restarts', () => {
  it('survives a connection broken while checked out between queries, and writes again', async () => {
    const pg = await testPostgres();
    const store = await PostgresStore.open(await pg.database(), { pollMs: 200 });
    try {
      // As a write's transaction holds it, between two statements.
      const held = await (store as unknown as { pool: import('pg').Pool }).pool.connect();
      await pg.restart();
      // The shutdown's FATAL reached the held connection while no query ran on it: its next one fails.
      await assert.rejects(held.query('SELECT 1'));
      held.release(true);
      const key = { kind: 'Policy', workspace: 'default', parent: '', name: 'after-restart' };
      await createWhenBack(store, key);
      assert.equal((await store.get(key))?.body.metadata.name, 'after-restart');
    } finally {
      await store.close();
    }
  });

  it('answers reads and writes with StoreUnavailableError while the database is down (a 503 to retry), and writes again once it is up', async () => {
    const pg = await testPostgres();
    const store = await PostgresStore.open(await pg.database(), { pollMs: 200 });
    const key = { kind: 'Policy', workspace: 'default', parent: '', name: 'while-down' };
    try {
      await pg.down();
      const write = store.write([{ op: 'create', key, body: { metadata: { name: 'while-down' } } }]);
      await assert.rejects(write, StoreUnavailableError);
      await assert.rejects(store.get(key), StoreUnavailableError);
      await assert.rejects(store.list({ kind: 'Policy', workspace: 'default' }), StoreUnavailableError);
      const answer = wireErrorOf(await write.catch((e) => e));
      assert.equal(answer.status, 503);
      assert.equal(answer.headers['retry-after'], '1');
      await pg.up();
      await createWhenBack(store, key);
      // The refused write left nothing: the one object is the later write's.
      assert.equal((await store.list({ kind: 'Policy', workspace: 'default' })).length, 1);
    } finally {
      await store.close();
    }
  });
});
