// The Store interface's contract, on both backends (SQLite and PostgreSQL): versions and optimistic concurrency,
// all-or-none writes, read-modify-write and checks inside the transaction, lists and their pages, the change feed.
// On PostgreSQL a second store on the same database plays another server of a cluster.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { STORE_DRIVERS, testPostgres } from '../test-support/store-drivers.js';
import { claimLabelOps, hostLabelKey } from './host-labels.js';
import {
  type Change,
  EVERY_WORKSPACE,
  type ResourceKey,
  type Store,
  type StoredObject,
  StoreError,
} from './store.js';

const key = (name: string, workspace = 'ws', kind = 'Note'): ResourceKey => ({
  kind,
  workspace,
  parent: '',
  name,
});

/** A body with what array literals and JSON escape: quotes, backslashes, braces, commas, NULL, non-ASCII. */
const TRICKY = { s: 'a "quoted" \\ back\\slash, {brace} NULL é 🚢\n', n: null };

const reason = (r: string) => (e: unknown) => e instanceof StoreError && e.reason === r;

/** Resolves once `pred` holds over what `changes` collects (a watcher on another server sees changes a bit later). */
async function until(pred: () => boolean, what: string) {
  for (let i = 0; i < 200 && !pred(); i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(pred(), what);
}

for (const driver of STORE_DRIVERS)
  describe(`store on ${driver.name}`, () => {
    test('versions grow with each write; a stale version, a second create or a missing object is refused', async () => {
      const { store, close } = await driver.open();
      try {
        const [a] = await store.write([{ op: 'create', key: key('a'), body: { v: 1 } }]);
        const [b] = await store.write([
          { op: 'update', key: key('a'), body: { v: 2 }, expectVersion: a.resourceVersion },
        ]);
        assert.ok(b.resourceVersion > a.resourceVersion);
        assert.deepEqual((await store.get(key('a')))?.body, { v: 2 });
        await assert.rejects(
          store.write([{ op: 'update', key: key('a'), body: { v: 3 }, expectVersion: a.resourceVersion }]),
          reason('conflict'),
        );
        await assert.rejects(store.write([{ op: 'create', key: key('a'), body: {} }]), reason('exists'));
        await assert.rejects(
          store.write([{ op: 'update', key: key('nope'), body: {} }]),
          reason('not_found'),
        );
        await assert.rejects(
          store.write([{ op: 'delete', key: key('a'), expectVersion: a.resourceVersion }]),
          reason('conflict'),
        );
        const [gone] = await store.write([{ op: 'delete', key: key('a') }]);
        assert.deepEqual(gone.body, { v: 2 }, 'a delete returns the object as it was');
        assert.equal(await store.get(key('a')), undefined);
      } finally {
        await close();
      }
    });

    test('a write applies every op or none, and a failing write does not take a concurrent one with it', async () => {
      const { store, close } = await driver.open();
      try {
        await store.write([{ op: 'create', key: key('held'), body: {} }]);
        const [bad, good] = await Promise.allSettled([
          store.write([
            { op: 'create', key: key('x'), body: {} },
            { op: 'create', key: key('held'), body: {} },
          ]),
          store.write([{ op: 'create', key: key('y'), body: {} }]),
        ]);
        assert.equal(bad.status, 'rejected');
        assert.equal(good.status, 'fulfilled');
        assert.equal(await store.get(key('x')), undefined, 'the first op of the failed write is undone');
        assert.ok(await store.get(key('y')));
        await assert.rejects(
          store.write([
            { op: 'create', key: key('z'), body: {} },
            {
              op: 'check',
              list: { kind: 'Note', workspace: 'ws' },
              judge: () => {
                throw new Error('refused');
              },
            },
          ]),
          /refused/,
        );
        assert.equal(await store.get(key('z')), undefined);
      } finally {
        await close();
      }
    });

    test('concurrent read-modify-writes from every server lose no update', async () => {
      const { store, peer, close } = await driver.open();
      try {
        const other = (await peer()) ?? store;
        await store.write([{ op: 'create', key: key('n'), body: { n: 0 } }]);
        const bump = (s: Store) =>
          s.write([{ op: 'update', key: key('n'), mutate: (c) => ({ n: c.body.n + 1 }) }]);
        await Promise.all(Array.from({ length: 40 }, (_, i) => bump(i % 2 ? store : other)));
        assert.equal((await store.get(key('n')))?.body.n, 40);
      } finally {
        await close();
      }
    });

    test('a check is serialised with the writes it lists: of two creates judged at once, one passes a limit of one', async () => {
      const { store, peer, close } = await driver.open();
      try {
        const other = (await peer()) ?? store;
        const limited = (s: Store, name: string) =>
          s.write([
            { op: 'create', key: key(name, 'ws', 'Box'), body: {} },
            {
              op: 'check',
              list: { kind: 'Box', workspace: 'ws' },
              judge: (objs) => {
                if (objs.length > 1) throw new Error('over the limit');
              },
            },
          ]);
        for (let round = 0; round < 5; round++) {
          const outcomes = await Promise.allSettled([
            limited(store, `a${round}`),
            limited(other, `b${round}`),
          ]);
          assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 1, `round ${round}`);
          const [left] = await store.list({ kind: 'Box', workspace: 'ws' });
          await store.write([{ op: 'delete', key: left }]);
        }
      } finally {
        await close();
      }
    });

    test("a check's reads run inside its write's transaction on PostgreSQL, their rows judged; SQLite runs none", async () => {
      const { store, close } = await driver.open();
      try {
        let seen: Record<string, unknown>[][] | undefined;
        await store.write([
          { op: 'create', key: key('r1'), body: {} },
          {
            op: 'check',
            list: { kind: 'Note', workspace: 'ws' },
            reads: [
              {
                text: 'SELECT $1::int + 1 AS n, pg_current_xact_id_if_assigned() IS NOT NULL AS in_tx',
                values: [41],
              },
            ],
            judge: (_objs, rows) => {
              seen = rows;
              if (rows && rows[0][0].n !== 42) throw new Error('not judged on the rows read');
            },
          },
        ]);
        if (driver.name === 'sqlite') assert.equal(seen, undefined);
        else assert.deepEqual(seen, [[{ n: 42, in_tx: true }]]);
        // A refusal judged on the rows leaves nothing of the write.
        await assert.rejects(
          store.write([
            { op: 'create', key: key('r2'), body: {} },
            {
              op: 'check',
              list: { kind: 'Note', workspace: 'ws' },
              reads: [{ text: 'SELECT 1 AS n', values: [] }],
              judge: (_objs, rows) => {
                if (driver.name === 'sqlite' || rows) throw new Error('refused');
              },
            },
          ]),
          /refused/,
        );
        assert.equal(await store.get(key('r2')), undefined);
      } finally {
        await close();
      }
    });

    test('lists: one workspace or every one, by parent and labels, in bytewise name order, page by page', async () => {
      const { store, close } = await driver.open();
      try {
        const names = ['b', 'B', 'a-1', 'a_1', 'é', 'z'];
        for (const [i, name] of names.entries())
          await store.write([
            { op: 'create', key: key(name), body: { metadata: { labels: { even: String(i % 2 === 0) } } } },
          ]);
        await store.write([{ op: 'create', key: key('a', 'other'), body: {} }]);
        await store.write([{ op: 'create', key: { ...key('c'), parent: 'p' }, body: {} }]);
        const all = (await store.list({ kind: 'Note', workspace: 'ws' })).map((o) => o.name);
        assert.deepEqual(all, ['B', 'a-1', 'a_1', 'b', 'c', 'z', 'é']);
        assert.deepEqual(
          (await store.list({ kind: 'Note', workspace: 'ws', parent: 'p' })).map((o) => o.name),
          ['c'],
        );
        assert.deepEqual(
          (await store.list({ kind: 'Note', workspace: 'ws', labels: { even: 'true' } })).map((o) => o.name),
          ['a-1', 'b', 'é'],
        );
        const pages: string[][] = [];
        let after: string | undefined;
        for (;;) {
          const page = await store.list({ kind: 'Note', workspace: 'ws', parent: '', limit: 2, after });
          if (!page.length) break;
          pages.push(page.map((o) => o.name));
          after = page.at(-1)?.name;
        }
        assert.deepEqual(pages, [
          ['B', 'a-1'],
          ['a_1', 'b'],
          ['z', 'é'],
        ]);
        assert.equal((await store.list({ kind: 'Note', workspace: EVERY_WORKSPACE })).length, 8);
      } finally {
        await close();
      }
    });

    test('a read-only list answers what a list does, the newest versions; a plain list answers copies to change', async () => {
      const { store, close } = await driver.open();
      try {
        await store.write([
          { op: 'create', key: key('a'), body: { v: 1, deep: { n: [1] } } },
          { op: 'create', key: key('b'), body: { v: 1 } },
        ]);
        // Read (and so kept parsed by a backend that keeps rows), then written: the read-only list shows the write.
        await store.get(key('a'));
        await store.write([{ op: 'update', key: key('a'), mutate: (cur) => ({ ...cur.body, v: 2 }) }]);
        const q = { kind: 'Note', workspace: 'ws' };
        const plain = await store.list(q);
        assert.deepEqual(await store.list({ ...q, readOnly: true }), plain);
        assert.deepEqual(
          plain.map((o) => o.body),
          [{ v: 2, deep: { n: [1] } }, { v: 1 }],
        );
        plain[0].body.deep.n.push(2);
        plain[1].body.v = 9;
        assert.deepEqual(
          (await store.list({ ...q, readOnly: true })).map((o) => o.body),
          [{ v: 2, deep: { n: [1] } }, { v: 1 }],
        );
      } finally {
        await close();
      }
    });
    test('watchers get every committed change in commit order, a delete with the object as it was', async () => {
      const { store, close } = await driver.open();
      try {
        const seen: Change[] = [];
        const stop = store.watch((c) => seen.push(c));
        await store.write([{ op: 'create', key: key('w'), body: { v: 1 } }]);
        // A watcher has seen a write when the write is acknowledged.
        assert.equal(seen.length, 1);
        await Promise.all([
          store.write([{ op: 'update', key: key('w'), body: { v: 2 } }]),
          store.write([{ op: 'create', key: key('w2'), body: {} }]),
          store.write([{ op: 'create', key: key('w2'), body: {} }]).catch(() => undefined),
        ]);
        await store.write([{ op: 'delete', key: key('w') }]);
        stop();
        await store.write([{ op: 'delete', key: key('w2') }]);
        assert.deepEqual(
          seen.map((c) => [c.type, c.object.name]),
          [
            ['ADDED', 'w'],
            ['MODIFIED', 'w'],
            ['ADDED', 'w2'],
            ['DELETED', 'w'],
          ],
        );
        const seqs = seen.map((c) => c.seq);
        assert.deepEqual(
          seqs,
          [...seqs].sort((a, b) => a - b),
        );
        assert.deepEqual(seen[3].object.body, { v: 2 });
        assert.equal(seen[3].object.resourceVersion, seen[1].object.resourceVersion);
      } finally {
        await close();
      }
    });

    test('an address label goes to one object when two servers claim it at once', async () => {
      const { store, peer, close } = await driver.open();
      try {
        const other = (await peer()) ?? store;
        const claim = async (s: Store, name: string) => {
          const owner = key(name, name, 'Sandbox');
          return s.write([
            { op: 'create', key: owner, body: {} },
            ...(await claimLabelOps(s, ['sbx-x'], owner)),
          ]);
        };
        const outcomes = await Promise.allSettled([claim(store, 'one'), claim(other, 'two')]);
        assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 1);
        const holder = (await store.get(hostLabelKey('sbx-x')))?.body.owner.name;
        assert.ok(
          await store.get(key(holder, holder, 'Sandbox')),
          'the label names the object that was written',
        );
      } finally {
        await close();
      }
    });

    test('writes queued together each stand or fail alone: a failed one leaves nothing, the others land in order', async () => {
      const { store, close } = await driver.open();
      try {
        const [held] = await store.write([{ op: 'create', key: key('held'), body: { n: 0 } }]);
        await store.write([{ op: 'update', key: key('held'), body: { n: 0 } }]);
        const seen: Change[] = [];
        store.watch((c) => seen.push(c));
        // Started in one tick, so the PostgreSQL store commits them in one transaction.
        const writes = [
          store.write([{ op: 'create', key: key('g1'), body: {} }]),
          store.write([{ op: 'create', key: key('held'), body: {} }]),
          store.write([
            { op: 'create', key: key('x1'), body: {} },
            { op: 'update', key: key('missing'), body: {} },
          ]),
          store.write([
            { op: 'update', key: key('held'), body: { n: -1 }, expectVersion: held.resourceVersion },
          ]),
          store.write([{ op: 'update', key: key('held'), mutate: (c) => ({ n: c.body.n + 1 }) }]),
          store.write([
            { op: 'create', key: key('x2'), body: {} },
            {
              op: 'update',
              key: key('held'),
              mutate: () => {
                throw new Error('refused by its mutate');
              },
            },
          ]),
          store.write([{ op: 'create', key: key('g2'), body: TRICKY }]),
          store.write([{ op: 'create', key: key('g2'), body: {} }]),
          store.write([{ op: 'update', key: key('held'), mutate: (c) => ({ n: c.body.n + 1 }) }]),
          store.write([
            { op: 'create', key: key('g3'), body: {} },
            { op: 'delete', key: key('g1') },
          ]),
        ];
        const outcomes = await Promise.allSettled(writes);
        const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [i] : []));
        assert.deepEqual(failed, [1, 2, 3, 5, 7]);
        const why = (i: number) => (outcomes[i] as PromiseRejectedResult).reason;
        assert.ok(reason('exists')(why(1)) && reason('not_found')(why(2)) && reason('conflict')(why(3)));
        assert.match(String(why(5)), /refused by its mutate/);
        assert.ok(reason('exists')(why(7)));
        for (const gone of ['x1', 'x2', 'g1'])
          assert.equal(await store.get(key(gone)), undefined, `${gone} is not there`);
        assert.deepEqual((await store.get(key('g2')))?.body, TRICKY, 'quotes, backslashes and braces kept');
        assert.ok(await store.get(key('g3')));
        assert.equal(
          (await store.get(key('held')))?.body.n,
          2,
          'both increments landed, one after the other',
        );
        assert.deepEqual(
          seen.map((c) => `${c.type} ${c.object.name} ${JSON.stringify(c.object.body)}`),
          [
            'ADDED g1 {}',
            'MODIFIED held {"n":1}',
            `ADDED g2 ${JSON.stringify(TRICKY)}`,
            'MODIFIED held {"n":2}',
            'ADDED g3 {}',
            'DELETED g1 {}',
          ],
          'the feed holds the landed writes only, in the order they were made',
        );
        const value = (i: number) => (outcomes.at(i) as PromiseFulfilledResult<StoredObject[]>).value;
        assert.deepEqual(
          [value(0)[0], value(4)[0], value(6)[0], value(8)[0], value(-1)[0]].map((o) => o.resourceVersion),
          seen.filter((c) => c.type !== 'DELETED').map((c) => c.seq),
          'each landed write is acknowledged with the version its change carries',
        );
        if (driver.name === 'postgres') {
          // A value PostgreSQL refuses (a NUL in text) fails the statement that writes the whole group: the group is
          // written again write by write, and only the refused one fails.
          const again = await Promise.allSettled([
            store.write([{ op: 'create', key: key('g4'), body: {} }]),
            store.write([{ op: 'create', key: key('bad\u0000name'), body: {} }]),
            store.write([{ op: 'update', key: key('held'), mutate: (c) => ({ n: c.body.n + 1 }) }]),
          ]);
          assert.deepEqual(
            again.map((o) => o.status),
            ['fulfilled', 'rejected', 'fulfilled'],
          );
          assert.ok(await store.get(key('g4')));
          assert.equal((await store.get(key('held')))?.body.n, 3);
        }
      } finally {
        await close();
      }
    });

    test('writers on two servers at once: a follower sees every change once, in order per object, no version lost or repeated', async () => {
      const { store, peer, close } = await driver.open();
      try {
        const other = (await peer()) ?? store;
        const follower = (await peer()) ?? store;
        const seen: Change[] = [];
        follower.watch((c) => seen.push(c));
        const HOT = 8;
        const ROUNDS = 3;
        const PER_ROUND = 120;
        /** Every acknowledged change: `type name version`. */
        const acked: string[] = [];
        const record = (type: string) => (out: StoredObject[]) => {
          for (const o of out) acked.push(`${type} ${o.name} ${o.resourceVersion}`);
        };
        for (let h = 0; h < HOT; h++)
          await store.write([{ op: 'create', key: key(`hot${h}`), body: { n: 0 } }]).then(record('ADDED'));
        const bumps = new Array(HOT).fill(0);
        for (let round = 0; round < ROUNDS; round++) {
          const writes: Promise<unknown>[] = [];
          for (let i = 0; i < PER_ROUND; i++) {
            const s = i % 2 ? other : store;
            const h = (i * 7 + round) % HOT;
            bumps[h]++;
            writes.push(
              s
                .write([{ op: 'update', key: key(`hot${h}`), mutate: (c) => ({ n: c.body.n + 1 }) }])
                .then(record('MODIFIED')),
              s.write([{ op: 'create', key: key(`r${round}-${i}`), body: { i } }]).then(record('ADDED')),
            );
            // The previous round's objects, deleted from the other server than made them.
            if (round > 0 && i % 3 === 0)
              writes.push(
                (i % 2 ? store : other)
                  .write([{ op: 'delete', key: key(`r${round - 1}-${i}`) }])
                  .then(record('DELETED')),
              );
          }
          await Promise.all(writes);
        }
        await until(() => seen.length >= acked.length, `the follower saw ${acked.length} changes`);
        await new Promise((r) => setTimeout(r, 300));
        const delivered = seen.map((c) => `${c.type} ${c.object.name} ${c.object.resourceVersion}`);
        assert.equal(new Set(delivered).size, delivered.length, 'no change delivered twice');
        assert.deepEqual([...delivered].sort(), [...acked].sort(), 'every acknowledged change, nothing else');
        for (let i = 1; i < seen.length; i++) assert.ok(seen[i].seq > seen[i - 1].seq, 'in sequence order');
        for (let h = 0; h < HOT; h++) {
          const mine = seen.filter((c) => c.object.name === `hot${h}` && c.type === 'MODIFIED');
          assert.deepEqual(
            mine.map((c) => c.object.body.n),
            Array.from({ length: bumps[h] }, (_, j) => j + 1),
            `hot${h}'s updates in the order they were made`,
          );
          assert.equal((await follower.get(key(`hot${h}`)))?.body.n, bumps[h]);
        }
      } finally {
        await close();
      }
    });

    if (driver.name === 'postgres') {
      test("after the database restarts, acknowledged writes are there, writes go on, another server's watcher misses none", async () => {
        const { store, peer, close } = await driver.open();
        try {
          const other = (await peer()) as Store;
          const seen: string[] = [];
          other.watch((c) => seen.push(c.object.name));
          for (let i = 0; i < 5; i++) await store.write([{ op: 'create', key: key(`r${i}`), body: { i } }]);
          await until(() => seen.length === 5, 'the other server saw the first writes');
          await (await testPostgres()).restart();
          for (let i = 5; i < 10; i++) {
            // A write meeting a session the restart ended fails (it is not acknowledged) and is sent again.
            for (let attempt = 0; ; attempt++) {
              try {
                await store.write([{ op: 'create', key: key(`r${i}`), body: { i } }]);
                break;
              } catch (e) {
                if (attempt > 20 || e instanceof StoreError) throw e;
                await new Promise((r) => setTimeout(r, 100));
              }
            }
          }
          await until(() => seen.length === 10, 'the other server saw the writes after the restart');
          assert.deepEqual(seen, ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9']);
          for (let i = 0; i < 10; i++) assert.equal((await other.get(key(`r${i}`)))?.body.i, i);
        } finally {
          await close();
        }
      });

      test("another server's watchers get each change, in order, even when a notification is lost", async () => {
        const { store, peer, close } = await driver.open();
        try {
          const other = (await peer()) as Store;
          const seen: Change[] = [];
          other.watch((c) => seen.push(c));
          for (let i = 0; i < 10; i++) await store.write([{ op: 'create', key: key(`c${i}`), body: { i } }]);
          await until(() => seen.length === 10, 'the other server saw the ten creates');
          assert.deepEqual(
            seen.map((c) => c.object.body.i),
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
          );
          // Cut every LISTEN connection: the notifications of the next writes reach nobody. The feed's sequence
          // (read on reconnect and on the poll) still delivers each change.
          const url = ((store as any).url as string) ?? '';
          const admin = new pg.Client({ connectionString: url });
          await admin.connect();
          await admin.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()",
          );
          await admin.end();
          for (let i = 10; i < 15; i++) await store.write([{ op: 'create', key: key(`c${i}`), body: { i } }]);
          await until(
            () => seen.length === 15,
            'the other server saw the writes made while its listener was down',
          );
          assert.deepEqual(
            seen.slice(10).map((c) => c.object.body.i),
            [10, 11, 12, 13, 14],
          );
        } finally {
          await close();
        }
      });
    }
  });
