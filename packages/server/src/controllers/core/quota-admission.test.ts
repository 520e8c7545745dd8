// The quota admission over a real SQLite store and the resource pipeline: two workspaces (two tenants), small
// limits. A workspace creates sandboxes until refused (memory, then count) with a 429 naming the quota and nothing
// half-written; the other workspace is untouched; a sandbox frees its room once TERMINATED; creates racing never pass
// the limit; what runs (leases) counts; agent and job specs that can never run are refused at once.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { QuotaLimits } from '../../config.js';
import { SecretBox } from '../../crypto/secret-box.js';
import { ApiError } from '../../errors.js';
import { hostLabelsOf } from '../../gateway/address.js';
import { agent } from '../../kinds/agent.js';
import { job } from '../../kinds/job.js';
import { sandbox } from '../../kinds/sandbox.js';
import { HOST_LABEL_KIND } from '../../store/host-labels.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { StoreError, EVERY_WORKSPACE } from '../../store/store.js';
import { quotaAdmission } from './quota-admission.js';
import { isRefusal, QuotaLedger } from './quota-ledger.js';

const LIMITS: QuotaLimits = { memoryMb: 1024, sandboxes: 3, replicas: 4, builds: 2, jobTasks: 2 };

describe('quota admission', () => {
  let dir: string;
  let store: SqliteStore;
  let ledger: QuotaLedger;
  let resources: Resources;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-quota-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    ledger = new QuotaLedger(store, LIMITS);
    await ledger.start();
    resources = new Resources(store, [sandbox, agent, job], new SecretBox(randomBytes(32)), {
      regions: ['local'],
      labelsOf: hostLabelsOf,
      admit: quotaAdmission(ledger),
    });
  });
  after(async () => {
    ledger.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const ctx = (workspace: string) => ({ workspace, parents: [], actor: `${workspace}-admin` });
  const kd = (k: string) => resources.kind(k);
  const createSandbox = (ws: string, name: string, memory: number) =>
    resources.create(kd('Sandbox'), ctx(ws), { metadata: { name }, spec: { runtime: { memory } } });
  const refusal = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (e) {
      assert.ok(e instanceof ApiError, String(e));
      return e;
    }
    assert.fail('the write was accepted');
  };
  const labels = async () =>
    (await store.list({ workspace: EVERY_WORKSPACE, kind: HOST_LABEL_KIND })).map((o) => o.name).sort();
  const terminate = (ws: string, name: string) =>
    resources.updateStatus({ kind: 'Sandbox', workspace: ws, parent: '', name }, { to: 'TERMINATED' });

  it('a workspace creating sandboxes is refused by memory, then by count, with 429s naming the quota', async () => {
    await createSandbox('a', 'one', 512);
    await createSandbox('a', 'two', 256);
    const before = await labels();
    const memory = await refusal(createSandbox('a', 'big', 512));
    assert.equal(memory.status, 429);
    assert.equal(memory.error, 'QUOTA_EXCEEDED');
    assert.match(
      memory.detail,
      /workspace "a" is at its memory quota: 768 MB of 1024 MB in use \(sandboxes 768 MB\), and this sandbox asks for 512 MB\. Delete a sandbox .*or ask for less memory \(spec\.runtime\.memory\), or ask the server's operator to raise BERTH_QUOTA_MEMORY_MB/,
    );
    await createSandbox('a', 'three', 128);
    const count = await refusal(createSandbox('a', 'four', 128));
    assert.equal(count.status, 429);
    assert.match(count.detail, /at its sandboxes quota: 3 of 3 sandboxes .*BERTH_QUOTA_SANDBOXES/);
    // Nothing of the refused creates was written: no object, no address label.
    for (const name of ['big', 'four'])
      assert.equal(await resources.get(kd('Sandbox'), 'a', [], name), undefined);
    assert.equal((await labels()).length, before.length + 1, 'only "three" claimed an address');
  });

  it("another workspace's sandboxes are not counted: it creates up to its own limits", async () => {
    await createSandbox('b', 'one', 1024);
    const full = await refusal(createSandbox('b', 'two', 128));
    assert.match(full.detail, /workspace "b" is at its memory quota: 1024 MB of 1024 MB/);
  });

  it('a deleted sandbox counts until TERMINATED, then its room is free again', async () => {
    await resources.delete(kd('Sandbox'), ctx('a'), 'one');
    await refusal(createSandbox('a', 'again', 128));
    await terminate('a', 'one');
    assert.equal(ledger.usage('a').sandboxes, 2);
    await createSandbox('a', 'again', 512);
    assert.equal(ledger.usage('a').memoryMb.sandboxes, 896);
  });

  it('creates racing for the last room never pass the limits together', async () => {
    for (const name of ['two', 'three', 'again']) {
      await resources.delete(kd('Sandbox'), ctx('a'), name);
      await terminate('a', name);
    }
    assert.equal(ledger.usage('a').sandboxes, 0);
    const names = Array.from({ length: 12 }, (_, i) => `race-${i}`);
    const outcomes = await Promise.allSettled(names.map((n) => createSandbox('a', n, 300)));
    const made = outcomes.filter((o) => o.status === 'fulfilled').length;
    const refused = outcomes.filter(
      (o) => o.status === 'rejected' && (o.reason as ApiError).error === 'QUOTA_EXCEEDED',
    ).length;
    assert.equal(made, 3, 'three of 300 MB fit in 1024 MB and 3 sandboxes');
    assert.equal(refused, 9, 'every other create is a quota refusal, none another error');
    const stored = await store.list({ kind: 'Sandbox', workspace: 'a' });
    assert.equal(stored.filter((o) => o.body.status !== 'TERMINATED').length, 3);
  });

  it('replicas, builds and tasks running count against the memory a sandbox create is judged on', async () => {
    await createSandbox('c', 'small', 256);
    const lease = ledger.take('c', 'replicas', 512);
    assert.ok(!isRefusal(lease));
    const r = await refusal(createSandbox('c', 'more', 512));
    assert.match(r.detail, /768 MB of 1024 MB in use \(sandboxes 256 MB, replicas 512 MB\)/);
    lease.release();
    await createSandbox('c', 'more', 512);
  });

  it('a sandbox already there is answered as such (409), not as a quota refusal', async () => {
    await assert.rejects(
      createSandbox('c', 'more', 512),
      (e) => e instanceof StoreError && e.reason === 'exists',
    );
  });

  it('an agent whose minScale replicas can never fit is refused at once; maxScale is not (it is capped)', async () => {
    const agentBody = (runtime: Record<string, number>) => ({ metadata: { name: 'bot' }, spec: { runtime } });
    const r = await refusal(resources.create(kd('Agent'), ctx('a'), agentBody({ memory: 512, minScale: 3 })));
    assert.equal(r.status, 429);
    assert.deepEqual(
      r.opts.errors?.map((e) => e.pointer),
      ['/spec/runtime/minScale'],
    );
    assert.equal(await resources.get(kd('Agent'), 'a', [], 'bot'), undefined);
    const made = await resources.create(kd('Agent'), ctx('a'), agentBody({ memory: 512, maxScale: 50 }));
    assert.equal(made.object.body.spec.runtime.maxScale, 50);
    const bigger = await refusal(
      resources.replace(kd('Agent'), ctx('a'), 'bot', agentBody({ memory: 2048, maxScale: 50 })),
    );
    assert.match(bigger.detail, /asks for 2048 MB, more than workspace "a"'s memory quota \(1024 MB\)/);
  });

  it('a job whose one task can never fit the memory quota is refused at once', async () => {
    const r = await refusal(
      resources.create(kd('Job'), ctx('a'), {
        metadata: { name: 'batch' },
        spec: { runtime: { memory: 4096 } },
      }),
    );
    assert.equal(r.status, 429);
    assert.deepEqual(
      r.opts.errors?.map((e) => e.pointer),
      ['/spec/runtime/memory'],
    );
    await resources.create(kd('Job'), ctx('a'), {
      metadata: { name: 'batch' },
      spec: { runtime: { memory: 512 } },
    });
  });
});
