// The leader's fence (docs/decisions/068-leader-fence.md) on the PostgreSQL driver and on the leadership itself: a
// write fenced on an advisory lock lands only while that lock is granted to the session it names, judged in the
// write's own transaction; and a leader whose lock session was ended behind its back writes nothing beside the next
// leader and stops at its first refused write, without waiting for its next check of the session.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../store/postgres.js';
import { FencedError, type ResourceKey } from '../store/store.js';
import { testPostgres } from '../test-support/store-drivers.js';
import { leaderFencedStore } from './fencing.js';
import { type Leadership, markSession, postgresLeadership } from './leadership.js';

const A: ResourceKey = { kind: 'Model', workspace: 'ws', parent: '', name: 'a' };
const B: ResourceKey = { kind: 'Model', workspace: 'ws', parent: '', name: 'b' };
/** A key with its high bit set: PostgreSQL shows a negative bigint key's halves as unsigned 32-bit oids. */
const LOCK = '-8070450532247928833';

const isLead = (err: unknown) => err instanceof FencedError && err.lost === 'lead';

async function until(what: string, f: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function setup() {
  const url = await (await testPostgres()).database();
  const store = await PostgresStore.open(url, { pollMs: 200 });
  const clients: pg.Client[] = [];
  const client = async () => {
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => undefined);
    await c.connect();
    clients.push(c);
    return c;
  };
  const admin = await client();
  return {
    url,
    store,
    admin,
    client,
    /** A session of its own that takes `lock` and a mark, as a leader does; its fence. */
    async holder(lock = LOCK) {
      const c = await client();
      const { rows } = await c.query<{ held: boolean; pid: number }>(
        'SELECT pg_try_advisory_lock($1::bigint) AS held, pg_backend_pid() AS pid',
        [lock],
      );
      const { held, pid } = rows[0];
      const mark = await markSession(c);
      return { c, held, pid, mark, fence: { lock, pid, mark } };
    },
    /** Ends session `pid` as an operator or a cut would, and waits until the database freed its locks. */
    async terminate(pid: number) {
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await until(
        'the terminated session to go',
        async () => (await admin.query('SELECT 1 FROM pg_locks WHERE pid = $1', [pid])).rowCount === 0,
      );
    },
    status: async (key: ResourceKey) => (await store.get(key))?.body.status,
    async close() {
      for (const c of clients) await c.end().catch(() => undefined);
      await store.close();
    },
  };
}

describe('the leader fence on postgres', () => {
  test('lands while its session holds the lock; refused once that session ended and another took it, all of it', async () => {
    const env = await setup();
    try {
      const first = await env.holder();
      assert.equal(first.held, true);
      await env.store.write([
        { op: 'fence', ...first.fence },
        { op: 'create', key: A, body: { status: 'DEPLOYED' } },
      ]);
      assert.equal(await env.status(A), 'DEPLOYED', 'the fenced write of the lock holder landed');

      await env.terminate(first.pid);
      const next = await env.holder();
      assert.equal(next.held, true, 'another session took the lock');
      // The old leader's multi-op write: an update and a create, fenced on its ended session.
      await assert.rejects(
        env.store.write([
          { op: 'fence', ...first.fence },
          { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'FAILED' }) },
          { op: 'create', key: B, body: { status: 'DEPLOYED' } },
        ]),
        isLead,
      );
      assert.equal(await env.status(A), 'DEPLOYED', 'the refused update did not land');
      assert.equal(await env.store.get(B), undefined, 'the refused create did not land');

      // The new holder's fence names its own session: its write lands.
      await env.store.write([
        { op: 'fence', ...next.fence },
        { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'DEPLOYING' }) },
      ]);
      assert.equal(await env.status(A), 'DEPLOYING');
    } finally {
      await env.close();
    }
  });

  test('refused for a session holding another lock, or none; a refused writer in a group commit rolls back alone', async () => {
    const env = await setup();
    try {
      const other = await env.holder('42');
      await env.store.write([{ op: 'create', key: A, body: { status: 'DEPLOYED' } }]);
      await assert.rejects(
        env.store.write([
          { op: 'fence', lock: LOCK, pid: other.pid, mark: other.mark },
          { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'FAILED' }) },
        ]),
        isLead,
      );
      // Written at once, the two share one transaction: the refused one's savepoint goes, the other commits.
      const [refused, plain] = await Promise.allSettled([
        env.store.write([
          { op: 'fence', lock: '42', pid: 1, mark: 1 },
          { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'FAILED' }) },
        ]),
        env.store.write([{ op: 'create', key: B, body: { status: 'DEPLOYED' } }]),
      ]);
      assert.equal(refused.status, 'rejected');
      assert.ok(isLead((refused as PromiseRejectedResult).reason));
      assert.equal(plain.status, 'fulfilled');
      assert.equal(await env.status(A), 'DEPLOYED');
      assert.equal(await env.status(B), 'DEPLOYED');
    } finally {
      await env.close();
    }
  });

  test("refused for the lock holder's pid with another session's mark (a pid reused by the next leader), alone and in a group", async () => {
    const env = await setup();
    try {
      // The next leader's session: it holds the lock under pid P. A deposed leader's fence names the same P (the
      // database gave the new session the ended one's pid) with the ended session's mark, which P does not hold.
      const next = await env.holder();
      assert.equal(next.held, true);
      const ended = await markSession(await env.client());
      assert.notEqual(ended, next.mark);
      const reused = { op: 'fence' as const, lock: LOCK, pid: next.pid, mark: ended };
      await env.store.write([{ op: 'create', key: A, body: { status: 'DEPLOYED', by: 'next' } }]);
      await assert.rejects(
        env.store.write([reused, { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, by: 'old' }) }]),
        isLead,
      );
      // In a group commit (the run of plain writes and fences judged together): refused alone.
      const [refused, landed] = await Promise.allSettled([
        env.store.write([reused, { op: 'create', key: B, body: { by: 'old' } }]),
        env.store.write([
          { op: 'fence', ...next.fence },
          { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'DEPLOYING' }) },
        ]),
      ]);
      assert.equal(refused.status, 'rejected');
      assert.ok(isLead((refused as PromiseRejectedResult).reason));
      assert.equal(landed.status, 'fulfilled', "the holder's own fence, with its own mark, lands");
      assert.deepEqual((await env.store.get(A))?.body, { status: 'DEPLOYING', by: 'next' });
      assert.equal(await env.store.get(B), undefined, 'the write under the reused pid did not land');
    } finally {
      await env.close();
    }
  });

  test("a deposed leader's write queued among plain writes of two servers is refused alone; the new leader's lands", async () => {
    const env = await setup();
    const peer = await PostgresStore.open(env.url, { pollMs: 200 });
    try {
      const old = await env.holder();
      await env.store.write([{ op: 'create', key: A, body: { status: 'DEPLOYED', by: 'old' } }]);
      await env.terminate(old.pid);
      const next = await env.holder();
      const note = (i: number): ResourceKey => ({ ...A, kind: 'Note', name: `n${i}` });
      // Started in one tick: each store commits its writes in one transaction, plain writes grouped around the
      // fenced ones.
      const writes = [
        env.store.write([{ op: 'create', key: note(0), body: {} }]),
        env.store.write([
          { op: 'fence', ...old.fence },
          { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'FAILED', by: 'old' }) },
          { op: 'create', key: B, body: { by: 'old' } },
        ]),
        env.store.write([{ op: 'create', key: note(1), body: {} }]),
        peer.write([{ op: 'create', key: note(2), body: {} }]),
        peer.write([
          { op: 'fence', ...next.fence },
          { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, by: 'new' }) },
        ]),
        peer.write([
          { op: 'fence', ...old.fence },
          { op: 'create', key: B, body: { by: 'old' } },
        ]),
        peer.write([{ op: 'create', key: note(3), body: {} }]),
      ];
      const outcomes = await Promise.allSettled(writes);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
      );
      assert.ok(isLead((outcomes[1] as PromiseRejectedResult).reason));
      assert.ok(isLead((outcomes[5] as PromiseRejectedResult).reason));
      assert.deepEqual((await env.store.get(A))?.body, { status: 'DEPLOYED', by: 'new' });
      assert.equal(await env.store.get(B), undefined, "none of the deposed leader's creates landed");
      for (let i = 0; i < 4; i++) assert.ok(await env.store.get(note(i)), `plain write ${i} landed`);
    } finally {
      await peer.close();
      await env.close();
    }
  });

  test('a leader whose lock session is ended behind its back writes nothing beside the next leader and stops at its first refused write', async () => {
    const env = await setup();
    const open: Leadership[] = [];
    try {
      const lost: unknown[] = [];
      const stops: string[] = [];
      const leadership = (who: string, checkMs: number) => {
        const l = postgresLeadership({
          url: env.url,
          retryMs: 50,
          checkMs,
          onLost: (_name, err) => lost.push(err),
          warn: () => undefined,
          info: () => undefined,
        });
        open.push(l);
        return {
          l,
          store: leaderFencedStore(env.store, {
            fence: () => l.fence('controllers'),
            refused: (err) => l.refused('controllers', err),
          }),
          lead: () =>
            l.lead('controllers', {
              start: async () => undefined,
              stop: async () => void stops.push(who),
            }),
        };
      };
      // The old leader checks its session only once a minute: it can learn of the loss only from the database.
      const old = leadership('old', 60_000);
      await old.lead();
      assert.deepEqual(old.l.leads(), ['controllers']);
      await old.store.write([{ op: 'create', key: A, body: { status: 'DEPLOYED' } }]);
      assert.equal(await env.status(A), 'DEPLOYED');

      const fence = old.l.fence('controllers');
      assert.ok(fence);
      await env.terminate(fence.pid);
      const next = leadership('next', 1000);
      await next.lead();
      await until('the next leader to lead', () => next.l.leads().includes('controllers'));
      await next.store.write([
        { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'DEPLOYING', by: 'next' }) },
      ]);

      await assert.rejects(
        old.store.write([
          { op: 'update', key: A, mutate: (cur) => ({ ...cur.body, status: 'FAILED', by: 'old' }) },
          { op: 'create', key: B, body: { status: 'DEPLOYED' } },
        ]),
        isLead,
      );
      // Its first refusal ends the lead: the role stops and onLost is told, long before its next check.
      await until('the old leader to stop', () => lost.length === 1, 5000);
      assert.ok(isLead(lost[0]), 'the lead was lost to the refused write');
      assert.deepEqual(stops, ['old']);
      assert.equal(old.l.fence('controllers'), undefined);
      assert.deepEqual(old.l.leads(), []);
      // Its later writes are refused without asking the database.
      await assert.rejects(old.store.write([{ op: 'create', key: B, body: { status: 'DEPLOYED' } }]), isLead);
      assert.deepEqual((await env.store.get(A))?.body, { status: 'DEPLOYING', by: 'next' });
      assert.equal(await env.store.get(B), undefined);
      assert.deepEqual(next.l.leads(), ['controllers'], 'the next leader leads on');
    } finally {
      for (const l of open) await l.close();
      await env.close();
    }
  });
});
