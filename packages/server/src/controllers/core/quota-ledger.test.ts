// The ledger: leases judged and taken in one step, given back once, a deploy's own replicas not counted, what
// already runs counted whatever the limits; in a cluster the leader's settings; sandboxes followed from the store,
// and found again by a new ledger.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { QuotaLimits } from '../../config.js';
import { SqliteStore } from '../../store/sqlite.js';
import { create, update } from '../../store/store.js';
import { isRefusal, type Lease, QuotaLedger } from './quota-ledger.js';

const LIMITS: QuotaLimits = { memoryMb: 1000, sandboxes: 2, replicas: 3, builds: 1, jobTasks: 2 };
const key = (ws: string, name: string) => ({ kind: 'Sandbox', workspace: ws, parent: '', name });
const body = (memory: number, status = 'DEPLOYED') => ({ status, spec: { runtime: { memory } } });

describe('quota ledger', () => {
  let dir: string;
  let store: SqliteStore;
  let ledger: QuotaLedger;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-ledger-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    ledger = new QuotaLedger(store, LIMITS);
    await ledger.start();
  });
  after(async () => {
    ledger.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('takes a slot while it fits, refuses naming the quota, and a released slot is free again (once)', () => {
    const a = ledger.take('w', 'jobTasks', 300) as Lease;
    const b = ledger.take('w', 'jobTasks', 300) as Lease;
    const third = ledger.take('w', 'jobTasks', 100);
    assert.ok(isRefusal(third));
    assert.equal(third.quota, 'jobTasks');
    assert.match(third.message, /2 of 2 job tasks running/);
    a.release();
    a.release();
    assert.equal(ledger.usage('w').jobTasks, 1);
    const c = ledger.take('w', 'jobTasks', 800);
    assert.ok(isRefusal(c) && c.quota === 'memoryMb', '300 + 800 MB is past 1000 MB');
    b.release();
    assert.equal(ledger.usage('w').memoryMb.jobTasks, 0);
  });

  it("a deploy's own replicas do not count; what already runs is counted whatever the limits", () => {
    const mine = [1, 2, 3].map(() => ledger.take('w', 'replicas', 100, { owner: 'w/Agent/x' }) as Lease);
    assert.ok(isRefusal(ledger.take('w', 'replicas', 100, { owner: 'w/Agent/x' })));
    const next = ledger.take('w', 'replicas', 100, { owner: 'w/Agent/x', excludeOwner: 'w/Agent/x' });
    assert.ok(!isRefusal(next));
    const adopted = ledger.take('w', 'replicas', 100, { force: true });
    assert.ok(!isRefusal(adopted));
    assert.equal(ledger.usage('w').replicas, 5);
    for (const l of [...mine, next, adopted]) l.release();
  });

  it('in a cluster, judges with the settings the leader publishes; its own while it leads', () => {
    let theirs: Record<string, unknown> | undefined = { replicas: 1, jobTasks: 'many', builds: -1 };
    const follower = new QuotaLedger(store, LIMITS, {
      leases: () => undefined,
      warn: () => undefined,
      leaderLimits: () => theirs,
    });
    assert.equal(follower.limits('v').replicas, 1);
    assert.equal(follower.limits('v').jobTasks, LIMITS.jobTasks, 'a value it does not understand: its own');
    assert.equal(follower.limits('v').builds, LIMITS.builds);
    const one = follower.take('v', 'replicas', 100) as Lease;
    const refused = follower.take('v', 'replicas', 100);
    assert.ok(isRefusal(refused) && refused.quota === 'replicas', "refused at the leader's 1");
    one.release();
    theirs = undefined; // this server leads now (or no leader is listed)
    assert.equal(follower.limits('v').replicas, LIMITS.replicas);
    follower.close();
  });

  it("follows the store's sandboxes, per workspace, until TERMINATED; a new ledger finds the same", async () => {
    await create(store, key('s', 'one'), body(400));
    await create(store, key('s', 'two'), body(200, 'FAILED'));
    await create(store, key('t', 'one'), body(900));
    assert.deepEqual(
      [ledger.usage('s').sandboxes, ledger.usage('s').memoryMb.sandboxes],
      [2, 600],
      'counted as soon as the write resolves',
    );
    const refused = ledger.take('s', 'builds', 500);
    assert.ok(isRefusal(refused) && refused.quota === 'memoryMb');
    await update(store, key('s', 'two'), body(200, 'TERMINATED'));
    assert.equal(ledger.usage('s').memoryMb.sandboxes, 400);
    const again = new QuotaLedger(store, LIMITS);
    await again.start();
    assert.deepEqual(again.usage('s'), ledger.usage('s'));
    assert.equal(again.usage('t').memoryMb.sandboxes, 900);
    again.close();
  });
});
