// The SQLite store's group commit: writes of one turn share a transaction, groups committed during one WAL fsync
// share the next, a failing write fails alone, and a write is acknowledged (and watched) only once its WAL is synced.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { SyncFn } from './fsync-batch.js';
import { SqliteStore } from './sqlite.js';
import { type Change, create, StoreError } from './store.js';

const key = (name: string) => ({ kind: 'Widget', workspace: 'ws', parent: '', name });

/** A sync that waits until the test lets it go, counting the calls; `fail` makes the next one throw. */
function heldSync() {
  const gates: (() => void)[] = [];
  const s = {
    calls: 0,
    fail: false,
    sync: (async () => {
      s.calls++;
      const failing = s.fail;
      s.fail = false;
      await new Promise<void>((r) => gates.push(r));
      if (failing) throw new Error('EIO');
    }) as SyncFn,
    /** Lets every sync started so far finish. */
    release: () => {
      for (const g of gates.splice(0)) g();
    },
  };
  return s;
}

function tempDb() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-sqlite-'));
  return { file: join(dir, 'berth.db'), done: () => rmSync(dir, { recursive: true, force: true }) };
}

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

test('a write is acknowledged, and its watchers told, only after the WAL holding it is synced', async () => {
  const db = tempDb();
  const held = heldSync();
  const store = new SqliteStore(db.file, { sync: held.sync });
  const seen: Change[] = [];
  store.watch((c) => seen.push(c));
  let acked = false;
  const w = create(store, key('a'), { v: 1 }).then((o) => {
    acked = true;
    return o;
  });
  await turns(5);
  assert.equal(held.calls, 1, 'the commit asked for one fsync');
  assert.equal(acked, false, 'not acknowledged before the fsync finished');
  assert.equal(seen.length, 0, 'no watcher told before the fsync finished');
  held.release();
  const o = await w;
  assert.equal(o.body.v, 1);
  assert.deepEqual(
    seen.map((c) => [c.type, c.object.name]),
    [['ADDED', 'a']],
  );
  await store.close();
  db.done();
});

test('groups committed while one fsync runs share the next, and are acknowledged in commit order', async () => {
  const db = tempDb();
  const held = heldSync();
  const store = new SqliteStore(db.file, { sync: held.sync });
  const order: string[] = [];
  const first = create(store, key('first'), {}).then(() => order.push('first'));
  await turns(3);
  // Each of these commits in its own turn, while the first fsync is still under way.
  const later: Promise<number>[] = [];
  for (const n of ['b', 'c', 'd']) {
    later.push(create(store, key(n), {}).then(() => order.push(n)));
    await turns(2);
  }
  assert.equal(held.calls, 1);
  held.release();
  await first;
  await turns(3);
  assert.equal(held.calls, 2, 'the three later groups share one fsync');
  assert.deepEqual(order, ['first']);
  held.release();
  await Promise.all(later);
  assert.deepEqual(order, ['first', 'b', 'c', 'd']);
  await store.close();
  db.done();
});

test('a failing write in a group fails alone; the others are stored', async () => {
  const db = tempDb();
  const store = new SqliteStore(db.file);
  await create(store, key('taken'), { v: 0 });
  // Issued in one turn: one transaction, each write in its own savepoint.
  const results = await Promise.allSettled([
    create(store, key('a'), { v: 1 }),
    create(store, key('taken'), { v: 2 }),
    create(store, key('b'), { v: 3 }),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  const err = (results[1] as PromiseRejectedResult).reason;
  assert.ok(err instanceof StoreError && err.reason === 'exists');
  await store.close();
  const again = new SqliteStore(db.file);
  assert.equal((await again.get(key('a')))?.body.v, 1);
  assert.equal((await again.get(key('taken')))?.body.v, 0);
  assert.equal((await again.get(key('b')))?.body.v, 3);
  await again.close();
  db.done();
});

test('a failed fsync fails the writes it was to confirm, and the watchers still hear of the committed rows', async () => {
  const db = tempDb();
  const held = heldSync();
  const store = new SqliteStore(db.file, { sync: held.sync });
  const seen: string[] = [];
  store.watch((c) => seen.push(c.object.name));
  held.fail = true;
  const w = create(store, key('a'), {});
  await turns(3);
  held.release();
  await assert.rejects(w, /committed but syncing it to disk failed: Error: EIO/);
  assert.deepEqual(seen, ['a']);
  // The next write gets a fresh fsync and is acknowledged.
  const next = create(store, key('b'), {});
  await turns(3);
  held.release();
  assert.equal((await next).name, 'b');
  await store.close();
  db.done();
});

test('close settles every write issued before it, and none is lost', async () => {
  const db = tempDb();
  const store = new SqliteStore(db.file);
  const writes = Array.from({ length: 50 }, (_, i) => create(store, key(`w${i}`), { i }));
  await store.close();
  const results = await Promise.allSettled(writes);
  assert.ok(results.every((r) => r.status === 'fulfilled'));
  const again = new SqliteStore(db.file);
  const all = await again.list({ kind: 'Widget', workspace: 'ws' });
  assert.equal(all.length, 50);
  await again.close();
  db.done();
});

test('an in-memory store acknowledges without a WAL to sync', async () => {
  const store = new SqliteStore(':memory:');
  assert.equal((await create(store, key('m'), { v: 1 })).body.v, 1);
  await store.close();
});

test('a write reads the rows earlier writes of its group left, and none of a write that failed', async () => {
  const db = tempDb();
  const store = new SqliteStore(db.file);
  await create(store, key('n'), { v: 0 });
  await create(store, key('gone'), { v: 0 });
  const bump = (by: number) =>
    store.write([{ op: 'update', key: key('n'), mutate: (cur) => ({ v: cur.body.v + by }) }]);
  // Issued in one turn: one transaction, so each mutate must see the ones before it (as SQLite shows them).
  const results = await Promise.allSettled([
    bump(1),
    // Updates the row, then is refused by its own check: rolled back, so the next write must not see +100.
    store.write([
      { op: 'update', key: key('n'), mutate: (cur) => ({ v: cur.body.v + 100 }) },
      {
        op: 'check',
        list: { kind: 'Widget', workspace: 'ws' },
        judge: () => {
          throw new Error('refused');
        },
      },
    ]),
    bump(10),
    store.write([{ op: 'delete', key: key('gone') }]),
    store.write([{ op: 'update', key: key('gone'), mutate: (cur) => cur.body }]),
    create(store, key('gone'), { v: 7 }),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
  );
  const values = results.map((r) => (r.status === 'fulfilled' ? (r.value as any)[0]?.body.v : undefined));
  assert.deepEqual([values[0], values[2]], [1, 11]);
  const notFound = (results[4] as PromiseRejectedResult).reason;
  assert.ok(
    notFound instanceof StoreError && notFound.reason === 'not_found',
    'the delete before it is seen',
  );
  assert.equal((await store.get(key('n')))?.body.v, 11);
  await store.close();
  const again = new SqliteStore(db.file);
  assert.equal((await again.get(key('n')))?.body.v, 11);
  assert.equal((await again.get(key('gone')))?.body.v, 7);
  await again.close();
  db.done();
});

test('a write whose row left the read cache reads it from the database', async () => {
  const db = tempDb();
  const store = new SqliteStore(db.file);
  await create(store, key('old'), { v: 1 });
  await store.close();
  // A fresh store has nothing cached: the update must still find the row and its version.
  const again = new SqliteStore(db.file);
  const [o] = await again.write([
    { op: 'update', key: key('old'), expectVersion: 1, mutate: (cur) => ({ v: cur.body.v + 1 }) },
  ]);
  assert.equal(o.body.v, 2);
  await again.close();
  db.done();
});

test('each read gets its own object: changing one changes neither the store nor the next read', async () => {
  const store = new SqliteStore(':memory:');
  await create(store, key('r'), { spec: { list: [{ x: 1 }] } });
  for (let i = 0; i < 2; i++) {
    // The first read parses the cached row, the second copies what the first parsed.
    const o = await store.get(key('r'));
    assert.ok(o);
    o.body.spec.list[0].x = 99;
    o.body.spec.list.push('more');
    o.body.extra = true;
  }
  assert.deepEqual((await store.get(key('r')))?.body, { spec: { list: [{ x: 1 }] } });
  await store.close();
});

test('a one-object write refused by its mutate writes nothing, beside writes of its group that are stored', async () => {
  const db = tempDb();
  const store = new SqliteStore(db.file);
  const seen: string[] = [];
  store.watch((c) => seen.push(`${c.type} ${c.object.name} ${c.object.resourceVersion}`));
  const [first] = await create(store, key('x'), { v: 1 }).then((o) => [o]);
  const results = await Promise.allSettled([
    store.write([
      {
        op: 'update',
        key: key('x'),
        mutate: () => {
          throw new StoreError('conflict', key('x'));
        },
      },
    ]),
    create(store, key('y'), { v: 2 }),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['rejected', 'fulfilled'],
  );
  const y = (results[1] as PromiseFulfilledResult<{ resourceVersion: number }>).value;
  // The refused write took no version: the next one stored is the one after the first.
  assert.equal(y.resourceVersion, first.resourceVersion + 1);
  assert.deepEqual(seen, [`ADDED x ${first.resourceVersion}`, `ADDED y ${y.resourceVersion}`]);
  await store.close();
  const again = new SqliteStore(db.file);
  assert.deepEqual((await again.get(key('x')))?.body, { v: 1 });
  await again.close();
  db.done();
});

test('a list answers each object as last written, whether its body came from the read cache or from SQLite', async () => {
  const store = new SqliteStore(':memory:');
  const names = async (workspace = 'ws') =>
    (await store.list({ kind: 'Widget', workspace })).map((o) => `${o.name}:${o.body.v}`);
  await create(store, key('a'), { v: 1 });
  await create(store, key('b'), { v: 1 });
  await store.get(key('a')); // a's parse kept: the list copies it
  assert.deepEqual(await names(), ['a:1', 'b:1']);
  await store.write([{ op: 'update', key: key('a'), mutate: () => ({ v: 2 }) }]);
  assert.deepEqual(await names(), ['a:2', 'b:1']);
  await store.write([{ op: 'update', key: key('b'), body: { v: 3 } }]);
  assert.deepEqual(await names(), ['a:2', 'b:3']);
  await store.write([{ op: 'delete', key: key('a') }]);
  assert.deepEqual(await names(), ['b:3']);
  // The same kind and name in another workspace, read and listed there first: never in this workspace's list.
  const other = { ...key('b'), workspace: 'other' };
  await create(store, other, { v: 'theirs' });
  await store.get(other);
  assert.deepEqual(await names('other'), ['b:theirs']);
  assert.deepEqual(await names(), ['b:3']);
  // Each listed object is the caller's own: changing it changes neither the store nor the next list.
  const [b] = await store.list({ kind: 'Widget', workspace: 'ws' });
  b.body.v = 'changed';
  assert.deepEqual(await names(), ['b:3']);
  assert.equal((await store.get(key('b')))?.body.v, 3);
  await store.close();
});

test("a list inside a write sees the group's uncommitted rows, not the read cache's older ones", async () => {
  const store = new SqliteStore(':memory:');
  await create(store, key('a'), { v: 1 });
  await store.list({ kind: 'Widget', workspace: 'ws' }); // a cached, parsed
  let judged: string[] = [];
  await store.write([
    { op: 'update', key: key('a'), body: { v: 2 } },
    { op: 'create', key: key('b'), body: { v: 1 } },
    {
      op: 'check',
      list: { kind: 'Widget', workspace: 'ws' },
      judge: (objects) => {
        judged = objects.map((o) => `${o.name}:${o.body.v}`);
      },
    },
  ]);
  assert.deepEqual(judged, ['a:2', 'b:1']);
  await store.close();
});

test('write numbers keep increasing across a reopen, also past a deleted newest object, and no change rows pile up', async () => {
  const db = tempDb();
  const store = new SqliteStore(db.file);
  await create(store, key('a'), { v: 1 });
  const b = await create(store, key('b'), { v: 1 });
  await store.write([{ op: 'delete', key: key('b') }]);
  await store.close();
  const again = new SqliteStore(db.file);
  const c = await create(again, key('c'), { v: 1 });
  // b's delete took a number after b's create: the next write's number is past both.
  assert.ok(c.resourceVersion > b.resourceVersion + 1, `${c.resourceVersion} after ${b.resourceVersion}`);
  const [a] = await again.write([{ op: 'update', key: key('a'), body: { v: 2 } }]);
  assert.ok(a.resourceVersion > c.resourceVersion);
  await again.close();
  const Database = (await import('better-sqlite3')).default;
  const raw = new Database(db.file);
  assert.equal((raw.prepare('SELECT count(*) AS n FROM changes').get() as { n: number }).n, 0);
  raw.close();
  db.done();
});

test("a group's list version changes with each committed write into the group, and with no other", async () => {
  const store = new SqliteStore(':memory:');
  const group = { kind: 'Widget', workspace: 'ws', parent: '' };
  const versions = [store.listVersion(group)];
  const changed = () => {
    const v = store.listVersion(group);
    const was = versions[versions.length - 1];
    versions.push(v);
    return v !== was;
  };
  await create(store, key('a'), { v: 1 });
  assert.ok(changed(), 'a create');
  await store.write([{ op: 'update', key: key('a'), mutate: (cur) => ({ ...cur.body, status: 'x' }) }]);
  assert.ok(changed(), 'a status-like update');
  await store.write([{ op: 'delete', key: key('a') }]);
  assert.ok(changed(), 'a delete');
  // Writes into other groups: another workspace, another parent, another kind; a refused write; a read.
  await create(store, { ...key('a'), workspace: 'other' }, { v: 1 });
  await create(store, { ...key('a'), parent: 'p' }, { v: 1 });
  await create(store, { ...key('a'), kind: 'Gadget' }, { v: 1 });
  await assert.rejects(store.write([{ op: 'update', key: key('missing'), body: {} }]));
  await store.list({ ...group, limit: 5 });
  assert.ok(!changed(), `${versions}`);
  await store.close();
});

test("pages of a group read from its kept names are SQLite's pages, through creates, deletes and odd names", async () => {
  const db = tempDb();
  const store = new SqliteStore(db.file);
  const group = { kind: 'Widget', workspace: 'ws', parent: 'p' };
  const at = (name: string) => ({ ...group, name });
  /** Every page of `limit`, as the store lists them (from memory once the group is kept). */
  const pages = async (limit: number) => {
    const out: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await store.list({ ...group, after, limit, readOnly: true });
      if (!page.length) return out;
      out.push(page.map((o) => `${o.name}:${o.body.v}`));
      after = page[page.length - 1].name;
    }
  };
  /** The same pages as SQLite reads them: inside a write, the store lists with SQL. */
  const sqlPages = async (limit: number) => {
    let all: string[] = [];
    await store.write([
      { op: 'check', list: { ...group }, judge: (objs) => (all = objs.map((o) => `${o.name}:${o.body.v}`)) },
    ]);
    const out: string[][] = [];
    for (let i = 0; i < all.length; i += limit) out.push(all.slice(i, i + limit));
    return out;
  };
  for (let i = 0; i < 25; i++) await create(store, at(`n-${String(i * 2).padStart(2, '0')}`), { v: i });
  await create(store, { ...at('n-01'), parent: 'q' }, { v: 'other parent' });
  assert.deepEqual(await pages(7), await sqlPages(7));
  // Names written after the group is kept: between, before, after the others; deleted; replaced.
  await create(store, at('n-03'), { v: 'new' });
  await create(store, at('a'), { v: 'first' });
  await create(store, at('z'), { v: 'last' });
  await store.write([{ op: 'delete', key: at('n-10') }]);
  await store.write([{ op: 'update', key: at('n-12'), body: { v: 'replaced' } }]);
  // A write refused in a group of writes leaves the names as they were.
  await assert.rejects(
    store.write([
      { op: 'create', key: at('n-05'), body: { v: 1 } },
      { op: 'create', key: at('n-03'), body: { v: 1 } },
    ]),
  );
  assert.deepEqual(await pages(7), await sqlPages(7));
  assert.ok(!(await pages(100)).flat().some((n) => n.startsWith('n-05')));
  // UTF-16 and UTF-8 orders differ past the surrogates: such a name sends the group back to SQLite.
  await create(store, at('n-\u{1F600}'), { v: 'emoji' });
  await create(store, at('n-\uFB01'), { v: 'ligature' });
  assert.deepEqual(await pages(3), await sqlPages(3));
  await store.close();
  db.done();
});
