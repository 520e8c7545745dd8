// The read path's caches (the store's row cache and its kept parses, list bodies served from it, the credential
// caches: docs/decisions/066-api-hot-path.md and 074-api-read-path.md) attacked by two tenants, each with its own key:
// what one tenant read into a cache is never answered to the other, and a write is read back at once.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newTenant, type Tenant } from '../test-support/tenants.js';
import { startTestServer, type TestServer } from '../test-support/server.js';

const policy = (name: string, output: number) => ({
  metadata: { name },
  spec: { type: 'maxToken', maxTokens: { output, granularity: 'hour' } },
});

describe('read caches, two tenants', () => {
  let s: TestServer;
  let a: Tenant;
  let b: Tenant;
  before(async () => {
    s = await startTestServer();
    a = await newTenant(s, 'cache-a');
    b = await newTenant(s, 'cache-b');
  });
  after(() => s.close());

  const json = async (r: Response) => ({ status: r.status, body: await r.json() });
  const outputs = (list: any[]) => list.map((p) => `${p.metadata.name}:${p.spec.maxTokens.output}`);

  it("a tenant never reads or lists another tenant's object that the other warmed the caches with", async () => {
    for (let i = 0; i < 3; i++)
      assert.equal(
        (await s.api('/policies', { method: 'POST', json: policy(`p${i}`, 100 + i), key: a.key })).status,
        200,
      );
    // A reads each object and lists a page twice: every row is cached and parsed.
    for (let i = 0; i < 3; i++) assert.equal((await s.api(`/policies/p${i}`, { key: a.key })).status, 200);
    for (let i = 0; i < 2; i++)
      assert.deepEqual(outputs((await json(await s.api('/policies?limit=2', { key: a.key }))).body), [
        'p0:100',
        'p1:101',
      ]);
    assert.equal((await s.api('/policies/p0', { key: b.key })).status, 404);
    assert.deepEqual((await json(await s.api('/policies', { key: b.key }))).body, []);
    // B naming A's workspace: not a member there, so the workspace does not exist for it.
    const viaHeader = { key: b.key, headers: { 'x-service-workspace': a.home } };
    assert.equal((await s.api('/policies/p0', viaHeader)).status, 404);
    assert.equal((await s.api('/policies', viaHeader)).status, 404);
    // The same name in B's workspace is B's own object, beside A's cached one.
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('p0', 7), key: b.key })).status,
      200,
    );
    assert.equal((await json(await s.api('/policies/p0', { key: b.key }))).body.spec.maxTokens.output, 7);
    assert.equal((await json(await s.api('/policies/p0', { key: a.key }))).body.spec.maxTokens.output, 100);
    assert.deepEqual(outputs((await json(await s.api('/policies', { key: b.key }))).body), ['p0:7']);
    assert.deepEqual(outputs((await json(await s.api('/policies?limit=1', { key: a.key }))).body), [
      'p0:100',
    ]);
  });

  it('an object replaced or deleted is read and listed as it is now, on the first request after', async () => {
    const put = await s.api('/policies/p1', { method: 'PUT', json: policy('p1', 555), key: a.key });
    assert.equal(put.status, 200);
    assert.equal((await json(await s.api('/policies/p1', { key: a.key }))).body.spec.maxTokens.output, 555);
    const first = await s.api('/policies?limit=2', { key: a.key });
    assert.deepEqual(outputs(await first.json()), ['p0:100', 'p1:555']);
    const next = await s.api(`/policies?limit=2&cursor=${first.headers.get('x-next-cursor')}`, {
      key: a.key,
    });
    assert.deepEqual(outputs(await next.json()), ['p2:102']);
    assert.equal((await s.api('/policies/p2', { method: 'DELETE', key: a.key })).status, 200);
    assert.equal((await s.api('/policies/p2', { key: a.key })).status, 404);
    assert.deepEqual(outputs((await json(await s.api('/policies', { key: a.key }))).body), [
      'p0:100',
      'p1:555',
    ]);
  });
});
