// The review's finding N17 on real sandboxes: one tenant created sandboxes until the host was promised many times
// over. With a small memory and count quota, tenant A is refused (memory first, then count) with a 429 naming the
// quota and nothing half-created, while tenant B still creates; A deleting one frees room; creates racing never pass
// the quota; A reads its quotas (and B cannot); the CLI shows them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { type SandboxServer, startSandboxServer } from './support.js';

describe('workspace quotas on sandboxes', () => {
  let s: SandboxServer;
  let a: Tenant;
  let b: Tenant;

  before(async () => {
    s = await startSandboxServer({ BERTH_QUOTA_MEMORY_MB: '1024', BERTH_QUOTA_SANDBOXES: '3' });
    a = await newTenant(s, 'tenant-a');
    b = await newTenant(s, 'tenant-b');
  });
  after(() => s?.close());

  const create = async (t: Tenant, name: string, memory: number) => {
    const r = await s.api('/sandboxes', {
      method: 'POST',
      key: t.key,
      json: { metadata: { name }, spec: { runtime: { memory } } },
    });
    return { status: r.status, body: await r.json() };
  };
  const names = async (t: Tenant) =>
    ((await (await s.api('/sandboxes', { key: t.key })).json()) as any[]).map((o) => o.metadata.name).sort();
  const deleteAndWait = async (t: Tenant, name: string) => {
    assert.equal((await s.api(`/sandboxes/${name}`, { method: 'DELETE', key: t.key })).status, 200);
    for (let i = 0; i < 600; i++) {
      const r = await s.api(`/sandboxes/${name}`, { key: t.key });
      if (r.status === 404 || (await r.json()).status === 'TERMINATED') return;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.fail(`${name} was not terminated`);
  };

  it('tenant A is refused by memory, then by count, with 429s naming the quota; nothing is half-created', async () => {
    assert.equal((await create(a, 'one', 512)).status, 200);
    assert.equal((await create(a, 'two', 256)).status, 200);
    const memory = await create(a, 'big', 512);
    assert.equal(memory.status, 429, JSON.stringify(memory.body));
    assert.equal(memory.body.error, 'QUOTA_EXCEEDED');
    assert.match(
      memory.body.detail,
      /workspace "tenant-a" is at its memory quota: 768 MB of 1024 MB in use \(sandboxes 768 MB\), and this sandbox asks for 512 MB\..*BERTH_QUOTA_MEMORY_MB/,
    );
    assert.equal((await s.api('/sandboxes/big', { key: a.key })).status, 404);
    assert.equal((await create(a, 'three', 128)).status, 200);
    const count = await create(a, 'four', 128);
    assert.equal(count.status, 429, JSON.stringify(count.body));
    assert.match(count.body.detail, /at its sandboxes quota: 3 of 3 sandboxes .*BERTH_QUOTA_SANDBOXES/);
    assert.deepEqual(await names(a), ['one', 'three', 'two']);
  });

  it('tenant B still creates while tenant A is full', async () => {
    const r = await create(b, 'bee', 512);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.status, 'DEPLOYED');
  });

  it('each tenant reads its own quotas; another workspace is a 404', async () => {
    const mine = await (await s.api('/quotas', { key: a.key })).json();
    assert.equal(mine.workspace, 'tenant-a');
    assert.deepEqual(
      [mine.quotas.memory.limit, mine.quotas.memory.used, mine.quotas.memory.usedBy.sandboxes],
      [1024, 896, 896],
    );
    assert.deepEqual([mine.quotas.sandboxes.limit, mine.quotas.sandboxes.used], [3, 3]);
    assert.equal(mine.quotas.sandboxes.setting, 'BERTH_QUOTA_SANDBOXES');
    const byName = await s.api('/workspaces/tenant-a/quotas', { key: a.key });
    assert.deepEqual(await byName.json(), mine);
    const theirs = await s.api('/workspaces/tenant-a/quotas', { key: b.key });
    assert.equal(theirs.status, 404);
    assert.equal((await theirs.json()).detail, 'workspace tenant-a not found');
    const own = await (await s.api('/quotas', { key: b.key })).json();
    assert.deepEqual([own.workspace, own.quotas.memory.used], ['tenant-b', 512]);
  });

  it('a sandbox deleted by tenant A frees its room once terminated', async () => {
    await deleteAndWait(a, 'one');
    const r = await create(a, 'five', 512);
    assert.equal(r.status, 200, JSON.stringify(r.body));
  });

  it("creates racing for tenant A's last room never pass its quota together", async () => {
    for (const n of ['two', 'three', 'five']) await deleteAndWait(a, n);
    const racing = await Promise.all(['r1', 'r2', 'r3', 'r4', 'r5', 'r6'].map((n) => create(a, n, 300)));
    const statuses = racing.map((r) => r.status).sort();
    assert.deepEqual(
      statuses,
      [200, 200, 200, 429, 429, 429],
      JSON.stringify(racing.map((r) => r.body.detail)),
    );
    const live = ((await (await s.api('/sandboxes', { key: a.key })).json()) as any[]).filter(
      (o) => o.status !== 'TERMINATED',
    );
    assert.equal(live.length, 3);
  });

  it('berth get quotas shows each limit and its use', async () => {
    const r = await berth({ url: s.url, adminKey: a.key }, ['get', 'quotas']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.stdout, /QUOTA\s+LIMIT\s+USED/);
    assert.match(r.stdout, /memory\s+1024 MB\s+900 MB/);
    assert.match(r.stdout, /sandboxes\s+3\s+3/);
    assert.match(r.stdout, /volumes\s+none\s+0 MB/);
  });
});
