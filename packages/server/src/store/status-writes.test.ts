// Resources.updateStatus and recordEvent against a real store (SQLite and PostgreSQL): they write only when something
// changes, honour `when` at the moment of the write, and never lose a concurrent writer's fields.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { SecretBox } from '../crypto/secret-box.js';
import { STORE_DRIVERS, type StoreDriver } from '../test-support/store-drivers.js';
import { widget } from '../test-support/test-kinds.js';
import { Resources } from './resources.js';
import { MAX_EVENTS } from './status-writes.js';
import type { Store, WriteOp } from './store.js';

const KEY = { kind: 'Widget', workspace: 'ws', parent: '', name: 'w' };

/** A store whose next write first lets `before` run (another writer landing between a read and a write). */
async function setup(driver: StoreDriver) {
  const opened = await driver.open();
  const store = opened.store;
  let before: (() => Promise<unknown>) | undefined;
  const racy: Store = Object.create(store);
  racy.write = async (ops: WriteOp[]) => {
    const race = before;
    before = undefined;
    if (race) await race();
    return store.write(ops);
  };
  let writes = 0;
  store.watch(() => writes++);
  const resources = new Resources(racy, [widget], new SecretBox(randomBytes(32)), { regions: ['local'] });
  await resources.create(
    widget,
    { workspace: 'ws', parents: [], actor: 'test' },
    { metadata: { name: 'w' }, spec: {} },
  );
  return {
    resources,
    store,
    writes: () => writes,
    raceNextWrite(f: () => Promise<unknown>) {
      before = f;
    },
    get: async () => (await store.get(KEY))!,
    close: opened.close,
  };
}

for (const driver of STORE_DRIVERS)
  describe(`on ${driver.name}`, () => {
    test('updateStatus moves the status with one event, and writes nothing when nothing would change', async () => {
      const env = await setup(driver);
      try {
        const out = await env.resources.updateStatus(KEY, {
          to: 'DEPLOYED',
          message: 'up',
          extras: { state: 'A' },
        });
        assert.equal(out?.body.status, 'DEPLOYED');
        assert.deepEqual(
          out?.body.events.map((e: any) => [e.status, e.message]),
          [
            ['DEPLOYING', 'created by test'],
            ['DEPLOYED', 'up'],
          ],
        );
        const before = env.writes();
        const again = await env.resources.updateStatus(KEY, {
          to: 'DEPLOYED',
          message: 'up',
          extras: { state: 'A' },
        });
        assert.equal(env.writes(), before, 'no write, so no watch event and no reconcile woken');
        assert.equal(again?.resourceVersion, out?.resourceVersion, 'returns the object as it is');
        await env.resources.updateStatus(KEY, { extras: { state: undefined } });
        assert.equal('state' in (await env.get()).body, false, 'an undefined extra deletes the field');
        assert.equal((await env.get()).body.events.length, 2, 'extras alone append no event');
      } finally {
        await env.close();
      }
    });

    test('updateStatus writes nothing when `when` is false for the object as it is at the write', async () => {
      const env = await setup(driver);
      try {
        // The caller read DEPLOYING; a DELETE lands between its read and its write.
        env.raceNextWrite(() =>
          env.resources.delete(widget, { workspace: 'ws', parents: [], actor: 'test' }, 'w'),
        );
        const out = await env.resources.updateStatus(KEY, {
          to: 'DEPLOYED',
          message: 'started',
          when: (cur) => cur.body.status === 'DEPLOYING',
        });
        assert.equal(out, undefined);
        assert.equal((await env.get()).body.status, 'DELETING');
        assert.equal(
          await env.resources.updateStatus({ ...KEY, name: 'none' }, { to: 'DEPLOYED' }),
          undefined,
        );
      } finally {
        await env.close();
      }
    });

    test('a status write never takes an object being deleted off its way to TERMINATED', async () => {
      const env = await setup(driver);
      try {
        await env.resources.delete(widget, { workspace: 'ws', parents: [], actor: 'test' }, 'w');
        assert.equal(await env.resources.updateStatus(KEY, { to: 'DEPLOYED', message: 'late' }), undefined);
        assert.equal(await env.resources.recordEvent(KEY, 'late failure', 'FAILED'), undefined);
        const t = await env.resources.updateStatus(KEY, { to: 'TERMINATED', message: 'done' });
        assert.equal(t?.body.status, 'TERMINATED');
      } finally {
        await env.close();
      }
    });

    test("concurrent status writers do not lose each other's fields or fail", async () => {
      const env = await setup(driver);
      try {
        // Another writer (the gateway recording use) lands between this write's read and its write.
        env.raceNextWrite(() => env.resources.updateStatus(KEY, { extras: { lastUsedAt: 'then' } }));
        await env.resources.updateStatus(KEY, {
          to: 'DEPLOYED',
          message: 'up',
          extras: { state: 'RUNNING' },
        });
        const body = (await env.get()).body;
        assert.equal(body.status, 'DEPLOYED');
        assert.equal(body.state, 'RUNNING');
        assert.equal(body.lastUsedAt, 'then');
        // And many at once, all through the store's write batching.
        await Promise.all(
          Array.from({ length: 20 }, (_, i) => env.resources.updateStatus(KEY, { extras: { [`f${i}`]: i } })),
        );
        const all = (await env.get()).body;
        for (let i = 0; i < 20; i++) assert.equal(all[`f${i}`], i);
      } finally {
        await env.close();
      }
    });

    test('recordEvent appends an event unless the last one says the same, and keeps at most MAX_EVENTS', async () => {
      const env = await setup(driver);
      try {
        const a = await env.resources.recordEvent(KEY, 'waiting');
        assert.deepEqual(a?.body.events.at(-1).message, 'waiting');
        assert.equal(a?.body.events.at(-1).status, 'DEPLOYING', 'the current status by default');
        const before = env.writes();
        await env.resources.recordEvent(KEY, 'waiting');
        assert.equal(env.writes(), before, 'the same fact is not written twice');
        const f = await env.resources.recordEvent(KEY, 'broken', 'FAILED');
        assert.equal(f?.body.status, 'FAILED');
        for (let i = 0; i < MAX_EVENTS + 5; i++) await env.resources.recordEvent(KEY, `e${i}`);
        const events = (await env.get()).body.events;
        assert.equal(events.length, MAX_EVENTS);
        assert.equal(events.at(-1).message, `e${MAX_EVENTS + 4}`);
      } finally {
        await env.close();
      }
    });

    test('updateStatuses writes several objects in one transaction, each judged at the write; a refusal writes none', async () => {
      const env = await setup(driver);
      try {
        const other = { ...KEY, name: 'v' };
        await env.resources.create(
          widget,
          { workspace: 'ws', parents: [], actor: 'test' },
          { metadata: { name: 'v' }, spec: {} },
        );
        const holderOf = async (key: typeof KEY) => (await env.store.get(key))?.body.state?.attachedTo;
        const claim = (holder: string) =>
          [KEY, other].map((key) => ({
            key,
            when: (cur: { body: any }) => {
              const held = cur.body.state?.attachedTo;
              if (held && held !== holder) throw new Error(`held by ${held}`);
              return true;
            },
            extras: (cur: { body: any }) => ({ state: { ...cur.body.state, attachedTo: holder } }),
          }));
        // Another holder takes `v` between b's read and its write: b's claim of both is refused whole.
        env.raceNextWrite(() =>
          env.resources.updateStatus(other, { extras: { state: { attachedTo: 'c' } } }),
        );
        await assert.rejects(env.resources.updateStatuses(claim('b')), /held by c/);
        assert.equal(await holderOf(KEY), undefined, 'nothing written');
        await env.resources.updateStatuses(claim('c'));
        assert.deepEqual([await holderOf(KEY), await holderOf(other)], ['c', 'c']);
        const writes = env.writes();
        await env.resources.updateStatuses(claim('c'));
        assert.equal(env.writes(), writes, 'nothing to change: no write');
      } finally {
        await env.close();
      }
    });

    test('a status write sets only the spec fields its kind declares as the server’s', async () => {
      const env = await setup(driver);
      try {
        await assert.rejects(
          env.resources.updateStatus(KEY, { spec: { '/size': 3 } }),
          /spec\/size is not a field the server writes/,
        );
      } finally {
        await env.close();
      }
    });
  });
