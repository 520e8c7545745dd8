// Quotas counted over a cluster's nodes (docs/decisions/092-cluster-wide-counts.md): two ledgers, each a node on one
// PostgreSQL, taking replicas of one workspace at once never pass its quota between them; another workspace's
// replicas do not count; a node whose lease lapsed stops counting; a slot given back frees it on the other node; a
// sandbox created on one node and a replica on another are judged one after the other, and so are a replica and a job
// task.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pg from 'pg';
import type { QuotaLimits } from '../config.js';
import { addHeld, isRefusal, type Lease, QuotaLedger } from '../controllers/core/quota-ledger.js';
import { emptyUsage } from '../controllers/core/quotas.js';
import { quotaAdmission } from '../controllers/core/quota-admission.js';
import { createExecution } from '../controllers/job/job-create.js';
import { JobRunner } from '../controllers/job/job-runner.js';
import { execKey } from '../controllers/job/job-store.js';
import type { BuiltApp } from '../builds/builder.js';
import { SecretBox } from '../crypto/secret-box.js';
import { KINDS } from '../kinds/index.js';
import type { KindDescriptor } from '../kinds/types.js';
import { Instances } from '../runtime/instances.js';
import { Resources } from '../store/resources.js';
import { DaemonDriver } from '../test-support/fake-daemon.js';
import { PostgresStore } from '../store/postgres.js';
import { testPostgres } from '../test-support/store-drivers.js';
import { type Nodes, postgresNodes } from './nodes.js';
import { postgresQuotaLeases, type QuotaLeases } from './quota-leases.js';

const TASK_APP: BuiltApp = {
  key: 'app1',
  dir: '/nonexistent/apps/app1',
  plan: { language: 'node', deps: 'none', buildScript: false, start: 'node job.js' } as never,
  cached: false,
};
const LIMITS: QuotaLimits = { memoryMb: 10_000, sandboxes: 10, replicas: 3, builds: 1, jobTasks: 2 };

describe('addHeld', () => {
  test("adds what nodes hold, leaving out this node's replicas of the owner a deploy replaces here", () => {
    const u = addHeld(
      emptyUsage(),
      [
        { workspace: 'a', consumer: 'replicas', owner: 'a/Agent/x', count: 2, memoryMb: 512, mine: true },
        { workspace: 'a', consumer: 'replicas', owner: 'a/Agent/x', count: 1, memoryMb: 256 },
        { workspace: 'a', consumer: 'replicas', owner: 'a/Agent/y', count: 1, memoryMb: 256 },
        { workspace: 'a', consumer: 'builds', count: 1, memoryMb: 2048 },
        { workspace: 'a', consumer: 'something else', count: 9, memoryMb: 9 },
      ],
      'a/Agent/x',
    );
    assert.equal(u.replicas, 2);
    assert.equal(u.builds, 1);
    assert.equal(u.memoryMb.replicas, 512);
    assert.equal(u.memoryMb.builds, 2048);
    assert.equal(u.sandboxes, 0);
  });
});

describe('quota leases on postgres', () => {
  async function setup() {
    const url = await (await testPostgres()).database();
    const store = await PostgresStore.open(url, { pollMs: 200 });
    const open: { nodes: Nodes; leases: QuotaLeases; ledger: QuotaLedger; store: PostgresStore }[] = [];
    const stores: PostgresStore[] = [store];
    /** A node; with `ownStore`, following the database through a store of its own, as a server does. */
    const node = async (id: string, ownStore = false) => {
      const nodes = await postgresNodes(url, {
        self: { id, address: `http://${id}`, region: 'local', cores: 2, memoryMb: 1024 },
        instances: async () => 0,
        leads: () => [],
        leaseMs: 60_000,
        warn: () => undefined,
      });
      const leases = await postgresQuotaLeases(url, {
        self: id,
        fence: () => nodes.fence(),
        warn: () => undefined,
      });
      const its = ownStore ? await PostgresStore.open(url, { pollMs: 200 }) : store;
      if (ownStore) stores.push(its);
      const ledger = new QuotaLedger(its, LIMITS, { leases: () => leases, warn: () => undefined });
      await ledger.start();
      const n = { nodes, leases, ledger, store: its };
      open.push(n);
      return n;
    };
    return {
      url,
      node,
      async close() {
        for (const n of open) {
          n.ledger.close();
          await n.leases.close().catch(() => undefined);
          await n.nodes.close().catch(() => undefined);
        }
        for (const s of stores) await s.close();
      },
    };
  }

  /** Takes a replica slot and waits for the database's judgement: the lease, or the refusal's message. */
  async function take(ledger: QuotaLedger, ws: string, owner = `${ws}/Agent/x`): Promise<Lease | string> {
    const l = ledger.take(ws, 'replicas', 100, { owner });
    if (isRefusal(l)) return l.message;
    const refused = await l.admitted;
    return refused ? refused.message : l;
  }

  test('twelve takes at once on two nodes for a quota of three admit three', async () => {
    const env = await setup();
    try {
      const a = await env.node('node-a');
      const b = await env.node('node-b');
      const got = await Promise.all(
        Array.from({ length: 12 }, (_, i) => take((i % 2 ? a : b).ledger, 'tenant-a')),
      );
      const leases = got.filter((x): x is Lease => typeof x !== 'string');
      assert.equal(leases.length, 3);
      const refusals = got.filter((x) => typeof x === 'string');
      assert.match(refusals[0] as string, /workspace "tenant-a" is at its replicas quota: 3 of 3/);
      // Once read, each node's own answer counts the other's: refused without asking the database.
      await a.ledger.readOthers();
      await b.ledger.readOthers();
      assert.equal(a.ledger.usage('tenant-a').replicas, 3);
      assert.equal(b.ledger.usage('tenant-a').replicas, 3);
      assert.ok(isRefusal(a.ledger.take('tenant-a', 'replicas', 100)));
      // Another tenant's replicas are its own.
      const other = await Promise.all([take(a.ledger, 'tenant-b'), take(b.ledger, 'tenant-b')]);
      assert.ok(other.every((x) => typeof x !== 'string'));
      // A slot given back on one node is free for the other.
      leases[0].release();
      let again: Lease | string = 'not yet';
      for (let i = 0; i < 50 && typeof again === 'string'; i++) {
        await new Promise((r) => setTimeout(r, 20));
        await b.ledger.readOthers();
        await a.ledger.readOthers();
        again = await take(leases[0].workspace === 'tenant-a' ? b.ledger : a.ledger, 'tenant-a');
      }
      assert.notEqual(typeof again, 'string', String(again));
    } finally {
      await env.close();
    }
  });

  /** Creates a sandbox of `memoryMb` through `store` with the quota admission's check, as the API's create does. */
  async function createSandbox(
    n: { store: PostgresStore; ledger: QuotaLedger },
    ws: string,
    memoryMb: number,
  ) {
    const key = { kind: 'Sandbox', workspace: ws, parent: '', name: `s-${memoryMb}` };
    const body = {
      metadata: { name: key.name },
      spec: { runtime: { memory: memoryMb } },
      status: 'DEPLOYING',
    };
    const checks = quotaAdmission(n.ledger)({ kind: 'Sandbox' } as KindDescriptor, key, body, undefined);
    await n.store.write([...checks, { op: 'create', key, body }]);
  }

  test('a sandbox and a replica taken on two nodes a moment apart never pass the memory quota together', async () => {
    const env = await setup();
    try {
      const a = await env.node('node-a', true);
      const b = await env.node('node-b', true);
      // 6,000 MB each under a quota of 10,000: one of the two fits, not both.
      const replica = b.ledger.take('tenant-m', 'replicas', 6_000, { owner: 'tenant-m/Agent/x' });
      assert.ok(!isRefusal(replica));
      assert.equal(await replica.admitted, undefined);
      // Node a has not read what b holds (its copy is a second old at most): the create's transaction reads it.
      assert.equal(a.ledger.usage('tenant-m').replicas, 0, "a's copy is behind");
      await assert.rejects(createSandbox(a, 'tenant-m', 6_000), /memory quota: 6000 MB of 10000 MB in use/);
      // The other way: a sandbox created on a, then at once a replica on b, whose store has not told it yet.
      await createSandbox(a, 'tenant-n', 6_000);
      const late = b.ledger.take('tenant-n', 'replicas', 6_000, { owner: 'tenant-n/Agent/x' });
      const refused = isRefusal(late) ? late : await late.admitted;
      assert.match(refused?.message ?? 'admitted', /tenant-n" is at its memory quota: 6000 MB of 10000 MB/);
      // A sandbox that fits beside what the other node runs is created.
      await createSandbox(a, 'tenant-m', 4_000);
    } finally {
      await env.close();
    }
  });

  test("a job task waits while another node's replica holds the room its copy did not see yet", async () => {
    const env = await setup();
    const logs = mkdtempSync(join(tmpdir(), 'berth-quota-tasks-'));
    const driver = new DaemonDriver({ onProcess: () => ({ status: 'completed', logs: 'done\n' }) });
    let runner: JobRunner | undefined;
    try {
      const a = await env.node('node-a', true);
      const b = await env.node('node-b', true);
      const resources = new Resources(a.store, KINDS, new SecretBox(randomBytes(32)), { regions: ['local'] });
      runner = new JobRunner({
        resources,
        builder: { builtByKey: (_ws, key) => (key === TASK_APP.key ? TASK_APP : undefined) },
        instances: new Instances({ driver }),
        logsDir: logs,
        quota: a.ledger,
      });
      await runner.start();
      const ctx = { workspace: 'tenant-t', parents: [], actor: 'tester' };
      await resources.create(resources.kind('Job'), ctx, {
        metadata: { name: 'nightly' },
        spec: { runtime: { memory: 6_000 } },
      });
      const job = await resources.updateStatus(
        { kind: 'Job', workspace: 'tenant-t', parent: '', name: 'nightly' },
        {
          to: 'DEPLOYED',
          extras: {
            activeRevision: 'rev1',
            revisions: [{ id: 'rev1', app: TASK_APP.key, source: 'd', start: 'node job.js', createdAt: '' }],
          },
        },
      );
      // 6,000 MB each under a quota of 10,000: a replica admitted on node b a moment ago, which node a's copy has not
      // read yet (its reads come every second; this one reads none).
      const replica = b.ledger.take('tenant-t', 'replicas', 6_000, { owner: 'tenant-t/Agent/x' });
      assert.ok(!isRefusal(replica));
      assert.equal(await replica.admitted, undefined);
      assert.equal(a.ledger.usage('tenant-t').replicas, 0, "a's copy is behind");
      const { id } = await createExecution({ resources, runner, now: Date.now }, 'tenant-t', job!, {
        tasks: [{}],
      });
      const exec = async () => (await a.store.get(execKey('tenant-t', 'nightly', id)))?.body;
      let events: string[] = [];
      for (let i = 0; i < 100 && !events.some((m) => m.includes('tasks wait for the workspace')); i++) {
        await new Promise((r) => setTimeout(r, 20));
        const o = await a.store.get({ kind: 'Job', workspace: 'tenant-t', parent: '', name: 'nightly' });
        events = (o?.body.events ?? []).map((e: { message: string }) => e.message);
      }
      assert.ok(
        events.some((m) =>
          /tasks wait for the workspace's quotas: .*memory quota: 6000 MB of 10000 MB/.test(m),
        ),
        JSON.stringify(events),
      );
      assert.equal(driver.creations, 0, 'no task sandbox was started');
      assert.equal((await exec())?.status, 'pending');
      // The replica ends: the task runs.
      replica.release();
      let status = '';
      for (let i = 0; i < 250 && status !== 'succeeded'; i++) {
        await new Promise((r) => setTimeout(r, 20));
        status = (await exec())?.status;
      }
      assert.equal(status, 'succeeded');
    } finally {
      await runner?.stop();
      await driver.close();
      await env.close();
      rmSync(logs, { recursive: true, force: true });
    }
  });

  test("a deploy's replicas on its own node do not count against its new one; on other nodes they do", async () => {
    const env = await setup();
    try {
      const a = await env.node('node-a');
      const b = await env.node('node-b');
      for (let i = 0; i < 2; i++) assert.notEqual(typeof (await take(b.ledger, 'tenant-a')), 'string');
      assert.notEqual(typeof (await take(a.ledger, 'tenant-a')), 'string');
      await a.ledger.readOthers();
      await b.ledger.readOthers();
      const replacing = { owner: 'tenant-a/Agent/x', excludeOwner: 'tenant-a/Agent/x' };
      const l = a.ledger.take('tenant-a', 'replicas', 100, replacing);
      assert.ok(!isRefusal(l));
      assert.equal(await l.admitted, undefined);
      // Node b's two are not replaced by a's deploy: with a's new one, the workspace is at 4 of 3 until a's old one
      // goes, and b's own deploy then replaces only its own two (4 - 2 + 1 fits).
      const m = b.ledger.take('tenant-a', 'replicas', 100, replacing);
      assert.ok(!isRefusal(m));
      assert.equal(await m.admitted, undefined);
      // A node whose deploy replaces nothing of its own finds no room.
      const c = await env.node('node-c');
      await c.ledger.readOthers();
      assert.ok(isRefusal(c.ledger.take('tenant-a', 'replicas', 100, replacing)));
    } finally {
      await env.close();
    }
  });

  test('a node whose lease lapsed stops counting: its replicas leave the quota', async () => {
    const env = await setup();
    try {
      const a = await env.node('node-a');
      const b = await env.node('node-b');
      for (let i = 0; i < 3; i++) assert.notEqual(typeof (await take(b.ledger, 'tenant-a')), 'string');
      assert.match(String(await take(a.ledger, 'tenant-a')), /replicas quota: 3 of 3/);
      // Node b stops beating, and its lease runs out by the database's clock.
      b.ledger.close();
      await b.nodes.close();
      const sql = new pg.Client({ connectionString: env.url });
      await sql.connect();
      await sql.query("UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'node-b'");
      await sql.end();
      await a.ledger.readOthers();
      assert.equal(a.ledger.usage('tenant-a').replicas, 0);
      assert.notEqual(typeof (await take(a.ledger, 'tenant-a')), 'string');
    } finally {
      await env.close();
    }
  });

  test('a node gone for long leaves no rows behind; one that returns writes its own again', async () => {
    const env = await setup();
    const sql = new pg.Client({ connectionString: env.url });
    await sql.connect();
    const rowsOf = async (node: string) =>
      (await sql.query('SELECT count(*)::int AS n FROM quota_leases WHERE node = $1', [node])).rows[0].n;
    try {
      const a = await env.node('node-a');
      const b = await env.node('node-b');
      assert.notEqual(typeof (await take(a.ledger, 'tenant-a')), 'string');
      for (let i = 0; i < 2; i++) assert.notEqual(typeof (await take(b.ledger, 'tenant-a')), 'string');
      // Node b goes for good: its lease lapsed an hour ago. Node a's lease lapsed too, but it is alive and beats.
      b.ledger.close();
      await b.nodes.close();
      await sql.query("UPDATE nodes SET heartbeat_at = now() - interval '1 hour'");
      assert.equal(await a.leases.prune(), 3, "both nodes' rows were past the bound");
      assert.equal(await rowsOf('node-b'), 0);
      assert.equal(await rowsOf('node-a'), 0);
      // Node a's next beat finds its lease lapsed and registers again: its replica is written again, and counts.
      await a.nodes.beat();
      for (let i = 0; i < 50 && (await rowsOf('node-a')) === 0; i++) {
        a.nodes.fence();
        await a.ledger.readOthers();
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(await rowsOf('node-a'), 1);
      assert.equal(await a.leases.prune(), 0, 'a live node keeps its rows');
      const c = await env.node('node-c');
      await c.ledger.readOthers();
      assert.equal(c.ledger.usage('tenant-a').replicas, 1);
    } finally {
      await sql.end();
      await env.close();
    }
  });

  test('what runs already (re-adopted) is counted whatever the limits', async () => {
    const env = await setup();
    try {
      const a = await env.node('node-a');
      const b = await env.node('node-b');
      const forced = Array.from({ length: 4 }, () =>
        a.ledger.take('tenant-a', 'replicas', 100, { force: true }),
      );
      assert.ok(forced.every((l) => !isRefusal(l) && l.admitted === undefined));
      for (let i = 0; i < 50; i++) {
        await b.ledger.readOthers();
        if (b.ledger.usage('tenant-a').replicas === 4) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(b.ledger.usage('tenant-a').replicas, 4);
      assert.match(String(await take(b.ledger, 'tenant-a')), /replicas quota: 4 of 3/);
    } finally {
      await env.close();
    }
  });
});
