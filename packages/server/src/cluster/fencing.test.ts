// The holder's fence (docs/decisions/064-cluster-fencing.md) on the store drivers themselves: a write carrying a
// `fence` op lands on PostgreSQL only while the object is placed on the writing node and that node holds its lease at
// the writer's epoch, judged in the write's own transaction; on SQLite (one server, no leases) it always holds. And the
// node registry: a node that finds its lease lapsed stops holding, registers again with a higher epoch, and holds
// again only after re-reading what is placed on it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../store/postgres.js';
import { SqliteStore } from '../store/sqlite.js';
import { FencedError, type ResourceKey, type Store } from '../store/store.js';
import { testPostgres } from '../test-support/store-drivers.js';
import { fencedStore } from './fencing.js';
import { type Nodes, type NodesOptions, postgresNodes } from './nodes.js';

const KEY: ResourceKey = { kind: 'Sandbox', workspace: 'ws', parent: '', name: 's' };
const OTHER: ResourceKey = { kind: 'Sandbox', workspace: 'ws', parent: '', name: 'other' };

const nodeOpts = (id: string, more: Partial<NodesOptions> = {}): NodesOptions => ({
  self: { id, address: `http://${id}`, region: 'local', cores: 2, memoryMb: 1024 },
  instances: async () => 0,
  leads: () => [],
  leaseMs: 60_000,
  warn: () => undefined,
  ...more,
});

/** A write of the holder of KEY: its status, fenced on (node, epoch). */
const fencedWrite = (store: Store, node: string, epoch: number, status: string) =>
  store.write([
    { op: 'fence', key: KEY, node, epoch },
    { op: 'update', key: KEY, mutate: (cur) => ({ ...cur.body, status }) },
  ]);

const refused = (lost: 'placement' | 'lease') => (err: unknown) =>
  err instanceof FencedError && err.lost === lost;

async function until(what: string, f: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('on postgres', () => {
  async function setup() {
    const url = await (await testPostgres()).database();
    const store = await PostgresStore.open(url, { pollMs: 200 });
    const sql = new pg.Client({ connectionString: url });
    await sql.connect();
    const open: Nodes[] = [];
    const node = async (id: string, more?: Partial<NodesOptions>) => {
      const n = await postgresNodes(url, nodeOpts(id, more));
      open.push(n);
      return n;
    };
    await store.write([
      { op: 'create', key: KEY, body: { node: 'node-a', status: 'DEPLOYED' } },
      { op: 'create', key: OTHER, body: { node: 'node-b', status: 'DEPLOYED' } },
    ]);
    return {
      store,
      sql,
      node,
      status: async () => (await store.get(KEY))?.body.status,
      async close() {
        for (const n of open) await n.close();
        await sql.end();
        await store.close();
      },
    };
  }

  test('a write of the node the object is placed on, under its current lease, is applied', async () => {
    const env = await setup();
    try {
      const a = await env.node('node-a');
      const f = a.fence();
      assert.ok(f, 'a registered node holds its lease');
      const out = await fencedWrite(env.store, f.node, f.epoch, 'STANDBY');
      assert.equal(out.length, 1, 'the fence adds no object to what the write returns');
      assert.equal(await env.status(), 'STANDBY');
    } finally {
      await env.close();
    }
  });

  test("an agent's write of a node among its replicaNodes is applied; of another node, refused (decision 092)", async () => {
    const env = await setup();
    try {
      const agent: ResourceKey = { kind: 'Agent', workspace: 'ws', parent: '', name: 'ag' };
      await env.store.write([
        { op: 'create', key: agent, body: { status: 'DEPLOYED', replicaNodes: ['node-a', 'node-b'] } },
      ]);
      const b = (await env.node('node-b')).fence();
      const c = (await env.node('node-c')).fence();
      assert.ok(b && c);
      const note = (f: { node: string; epoch: number }, message: string) =>
        env.store.write([
          { op: 'fence', key: agent, ...f },
          { op: 'update', key: agent, mutate: (cur) => ({ ...cur.body, note: message }) },
        ]);
      await note(b, 'from b');
      assert.equal((await env.store.get(agent))?.body.note, 'from b');
      await assert.rejects(note(c, 'from c'), refused('placement'));
      assert.equal((await env.store.get(agent))?.body.note, 'from b');
    } finally {
      await env.close();
    }
  });

  test("a write under a stale epoch is refused (the node's id was registered again since)", async () => {
    const env = await setup();
    try {
      const first = (await env.node('node-a')).fence();
      assert.ok(first);
      const again = (await env.node('node-a')).fence();
      assert.ok(again && again.epoch > first.epoch, 'a new registration bumps the epoch');
      await assert.rejects(fencedWrite(env.store, 'node-a', first.epoch, 'FAILED'), refused('lease'));
      assert.equal(await env.status(), 'DEPLOYED', 'nothing of the refused write landed');
      await fencedWrite(env.store, 'node-a', again.epoch, 'FAILED');
      assert.equal(await env.status(), 'FAILED');
    } finally {
      await env.close();
    }
  });

  test("a write under a lapsed lease is refused, by the database's clock", async () => {
    const env = await setup();
    try {
      const f = (await env.node('node-a')).fence();
      assert.ok(f);
      await env.sql.query(
        `UPDATE nodes SET heartbeat_at = now() - interval '61 seconds' WHERE id = 'node-a'`,
      );
      await assert.rejects(fencedWrite(env.store, f.node, f.epoch, 'FAILED'), refused('lease'));
      assert.equal(await env.status(), 'DEPLOYED');
    } finally {
      await env.close();
    }
  });

  test('a write about an object placed on another node is refused, as is a fence on a missing object', async () => {
    const env = await setup();
    try {
      const f = (await env.node('node-a')).fence();
      assert.ok(f);
      // The leader placed KEY on node-b (a write of its own, not fenced).
      await env.store.write([{ op: 'update', key: KEY, mutate: (cur) => ({ ...cur.body, node: 'node-b' }) }]);
      await assert.rejects(fencedWrite(env.store, f.node, f.epoch, 'FAILED'), refused('placement'));
      const now = await env.store.get(KEY);
      assert.equal(now?.body.status, 'DEPLOYED');
      assert.equal(now?.body.node, 'node-b');
      const gone = { ...KEY, name: 'gone' };
      await assert.rejects(
        env.store.write([
          { op: 'fence', key: gone, ...f },
          { op: 'delete', key: OTHER },
        ]),
        refused('placement'),
      );
      assert.ok(await env.store.get(OTHER), 'the refused write deleted nothing');
    } finally {
      await env.close();
    }
  });

  test('a refused writer in a group commit rolls back alone; the others commit', async () => {
    const env = await setup();
    try {
      const f = (await env.node('node-a')).fence();
      assert.ok(f);
      const [stale, other] = await Promise.allSettled([
        fencedWrite(env.store, 'node-a', f.epoch + 1, 'FAILED'),
        env.store.write([
          { op: 'update', key: OTHER, mutate: (cur) => ({ ...cur.body, status: 'STANDBY' }) },
        ]),
      ]);
      assert.equal(stale.status, 'rejected');
      assert.equal(other.status, 'fulfilled');
      assert.equal(await env.status(), 'DEPLOYED');
      assert.equal((await env.store.get(OTHER))?.body.status, 'STANDBY');
    } finally {
      await env.close();
    }
  });

  test('in one group, each fence is judged where it stands: after a move written before it, the old holder is refused', async () => {
    const env = await setup();
    try {
      const a = (await env.node('node-a')).fence();
      const b = (await env.node('node-b')).fence();
      assert.ok(a && b);
      const PLAIN: ResourceKey = { ...KEY, kind: 'Note', name: 'plain' };
      // Started in one tick: one transaction, judged in this order.
      const outcomes = await Promise.allSettled([
        fencedWrite(env.store, 'node-a', a.epoch, 'RUNNING-A'),
        env.store.write([{ op: 'update', key: KEY, mutate: (cur) => ({ ...cur.body, node: 'node-b' }) }]),
        fencedWrite(env.store, 'node-a', a.epoch, 'LATE-A'),
        fencedWrite(env.store, 'node-b', b.epoch, 'RUNNING-B'),
        env.store.write([
          { op: 'fence', key: OTHER, node: 'node-b', epoch: b.epoch + 1 },
          { op: 'delete', key: OTHER },
        ]),
        env.store.write([{ op: 'create', key: PLAIN, body: {} }]),
      ]);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled'],
      );
      assert.ok(refused('placement')((outcomes[2] as PromiseRejectedResult).reason));
      assert.ok(refused('lease')((outcomes[4] as PromiseRejectedResult).reason));
      assert.deepEqual((await env.store.get(KEY))?.body, { node: 'node-b', status: 'RUNNING-B' });
      assert.ok(await env.store.get(OTHER), 'the stale epoch deleted nothing');
      assert.ok(await env.store.get(PLAIN));
    } finally {
      await env.close();
    }
  });

  test('through fencedStore: a node without a lease writes nothing about its sandboxes; other kinds pass', async () => {
    const env = await setup();
    try {
      let fence: { node: string; epoch: number } | undefined;
      let asked = 0;
      const held = fencedStore(
        env.store,
        { fence: () => fence, refused: () => asked++ },
        (k) => k.kind === 'Sandbox',
      );
      const update = (key: ResourceKey, status: string) =>
        held.write([{ op: 'update', key, mutate: (cur) => ({ ...cur.body, status }) }]);
      await assert.rejects(update(KEY, 'FAILED'), refused('lease'));
      assert.equal(await env.status(), 'DEPLOYED');
      const widget = { kind: 'Widget', workspace: 'ws', parent: '', name: 'w' };
      await env.store.write([{ op: 'create', key: widget, body: {} }]);
      await update(widget, 'X');
      fence = (await env.node('node-a')).fence();
      await update(KEY, 'STANDBY');
      assert.equal(await env.status(), 'STANDBY');
      await assert.rejects(update(OTHER, 'FAILED'), refused('placement'));
      assert.equal(asked, 0);
      await env.sql.query(
        `UPDATE nodes SET heartbeat_at = now() - interval '61 seconds' WHERE id = 'node-a'`,
      );
      await assert.rejects(update(KEY, 'FAILED'), refused('lease'));
      assert.equal(asked, 1, 'a lease refusal makes the node look at its lease at once');
    } finally {
      await env.close();
    }
  });

  test('a node whose lease lapsed stops holding, registers again with a higher epoch, re-reads, then holds', async () => {
    const env = await setup();
    try {
      const events: string[] = [];
      let release: () => void = () => undefined;
      let gate: Promise<void> | undefined;
      const a = await env.node('node-a', {
        leaseMs: 1000,
        settle: async () => {
          events.push('settle');
          await gate;
        },
        held: () => events.push('held'),
      });
      assert.deepEqual(events, ['settle', 'held'], 'at registration it re-reads, then holds');
      const first = a.fence();
      assert.ok(first);
      gate = new Promise((r) => {
        release = r;
      });
      // A pause past its lease, as the database sees it (its heartbeats would have stopped).
      await env.sql.query(`UPDATE nodes SET heartbeat_at = now() - interval '2 seconds' WHERE id = 'node-a'`);
      await until('the node to register again', () => events.length === 3);
      assert.equal(events[2], 'settle');
      assert.equal(a.fence(), undefined, 'while it re-reads what is placed on it, it does not hold');
      await assert.rejects(fencedWrite(env.store, 'node-a', first.epoch, 'FAILED'), refused('lease'));
      release();
      await until('the node to hold again', () => a.fence() !== undefined);
      assert.equal(events[3], 'held');
      const again = a.fence();
      assert.ok(again && again.epoch > first.epoch);
      const { rows } = await env.sql.query(`SELECT epoch FROM nodes WHERE id = 'node-a'`);
      assert.equal(Number(rows[0].epoch), again.epoch);
      await fencedWrite(env.store, 'node-a', again.epoch, 'STANDBY');
      assert.equal(await env.status(), 'STANDBY');
    } finally {
      await env.close();
    }
  });

  test('a node superseded by another process with its id does not register again (no fight over the id)', async () => {
    const env = await setup();
    try {
      const a = await env.node('node-a', { leaseMs: 1000 });
      const b = await env.node('node-a', { leaseMs: 1000 });
      await until('the first to find itself superseded', () => a.fence() === undefined);
      await new Promise((r) => setTimeout(r, 600));
      const { rows } = await env.sql.query(`SELECT epoch FROM nodes WHERE id = 'node-a'`);
      assert.equal(Number(rows[0].epoch), b.fence()?.epoch);
    } finally {
      await env.close();
    }
  });
});

describe('on sqlite', () => {
  test('a fence always holds (one server, no leases): the write is applied as without it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-fence-'));
    const store = new SqliteStore(join(dir, 'berth.db'));
    try {
      await store.write([{ op: 'create', key: KEY, body: { status: 'DEPLOYED' } }]);
      const out = await fencedWrite(store, 'any', 1, 'STANDBY');
      assert.equal(out.length, 1);
      assert.equal(out[0].body.status, 'STANDBY');
      assert.equal((await store.get(KEY))?.body.status, 'STANDBY');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
