// GET answers kept as text (api/answer-texts.ts, decision 083): a kept text is sent only while the object is at the
// version it was made from, only to the workspace it was made in, and never holds or hides an opened secret.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newTenant, type Tenant } from '../test-support/tenants.js';
import { startTestServer, type TestServer } from '../test-support/server.js';
import { AnswerTexts } from './answer-texts.js';

const policy = (name: string, output: number) => ({
  metadata: { name },
  spec: { type: 'maxToken', maxTokens: { output, granularity: 'hour' } },
});

describe('GET answers kept as text', () => {
  let s: TestServer;
  let a: Tenant;
  let b: Tenant;
  before(async () => {
    s = await startTestServer();
    a = await newTenant(s, 'texts-a');
    b = await newTenant(s, 'texts-b');
  });
  after(() => s.close());

  /** The policy's output limit as `key` reads it, read twice so the second answer is the kept text. */
  const output = async (name: string, key: string) => {
    const first = await s.api(`/policies/${name}`, { key });
    if (first.status !== 200) return first.status;
    const again = await s.api(`/policies/${name}`, { key });
    assert.equal(again.headers.get('content-type'), 'application/json; charset=utf-8');
    return (await again.json()).spec.maxTokens.output;
  };

  it('a write the API did not make (a status-like write keeping the client version) is read at once', async () => {
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('w', 1), key: a.key })).status,
      200,
    );
    assert.equal(await output('w', a.key), 1);
    // Straight to the store, as a controller writes: the client-visible resourceVersion stays the same.
    const key = { kind: 'Policy', workspace: a.home, parent: '', name: 'w' };
    await s.store.write([
      {
        op: 'update',
        key,
        mutate: (cur) => ({
          ...cur.body,
          spec: { ...cur.body.spec, maxTokens: { output: 2, granularity: 'hour' } },
        }),
      },
    ]);
    assert.equal(await output('w', a.key), 2);
    const listed = await (await s.api('/policies', { key: a.key })).json();
    assert.deepEqual(
      listed.map((p: any) => p.spec.maxTokens.output),
      [2],
    );
    assert.equal(
      (await s.api('/policies/w', { method: 'PUT', json: policy('w', 3), key: a.key })).status,
      200,
    );
    assert.equal(await output('w', a.key), 3);
    assert.equal((await s.api('/policies/w', { method: 'DELETE', key: a.key })).status, 200);
    assert.equal(await output('w', a.key), 404);
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('w', 4), key: a.key })).status,
      200,
    );
    assert.equal(await output('w', a.key), 4);
  });

  it("a tenant never gets the text another tenant's object of the same name left", async () => {
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('same', 10), key: a.key })).status,
      200,
    );
    assert.equal(await output('same', a.key), 10);
    assert.equal(await output('same', b.key), 404);
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('same', 20), key: b.key })).status,
      200,
    );
    assert.equal(await output('same', b.key), 20);
    assert.equal(await output('same', a.key), 10);
    // B naming A's workspace is not a member there: the workspace does not exist for it.
    const viaHeader = { key: b.key, headers: { 'x-service-workspace': a.home } };
    assert.equal((await s.api('/policies/same', viaHeader)).status, 404);
  });

  it('a secret opened for an admin is neither kept for the next read nor hidden by a kept redacted text', async () => {
    const conn = {
      metadata: { name: 'llm' },
      spec: { integration: 'openai', secret: { apiKey: 'sk-texts-secret-1234' } },
    };
    const path = '/integrations/connections/llm';
    assert.equal(
      (await s.api('/integrations/connections', { method: 'POST', json: conn, key: a.key })).status,
      200,
    );
    for (let i = 0; i < 2; i++) {
      const redacted = await (await s.api(path, { key: a.key })).json();
      assert.notEqual(redacted.spec.secret.apiKey, 'sk-texts-secret-1234');
    }
    // The tenant's key is its workspace's admin.
    const shown = await (await s.api(`${path}?show_secrets=true`, { key: a.key })).json();
    assert.equal(shown.spec.secret.apiKey, 'sk-texts-secret-1234');
    const after = await (await s.api(path, { key: a.key })).json();
    assert.notEqual(after.spec.secret.apiKey, 'sk-texts-secret-1234');
  });

  it('a list page in the {data, meta} envelope joins the kept texts as the page made without them reads', async () => {
    for (const n of ['env-1', 'env-2', 'env-3'])
      assert.equal(
        (await s.api('/policies', { method: 'POST', json: policy(n, 7), key: b.key })).status,
        200,
      );
    const page = async (version: string, cursor = '') => {
      const r = await s.api(`/policies?limit=2${cursor ? `&cursor=${cursor}` : ''}`, {
        key: b.key,
        headers: { 'blaxel-version': version },
      });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
      return r.json();
    };
    for (const n of ['env-1', 'env-2', 'env-3']) await s.api(`/policies/${n}`, { key: b.key }); // texts kept
    const first = await page('2026-04-28');
    assert.deepEqual(Object.keys(first), ['data', 'meta']);
    assert.equal(first.meta.hasMore, true);
    const second = await page('2026-04-28', first.meta.nextCursor);
    assert.deepEqual(second.meta, { hasMore: false });
    const names = [...first.data, ...second.data].map((p: any) => p.metadata.name);
    assert.deepEqual(
      names.filter((n: string) => n.startsWith('env-')),
      ['env-1', 'env-2', 'env-3'],
    );
    // The same objects as a bare page of the baseline version, and as each GET reads them.
    const bare = await page('2025-01-01');
    assert.ok(Array.isArray(bare));
    assert.deepEqual(bare, first.data);
    for (const p of first.data)
      assert.deepEqual(p, await (await s.api(`/policies/${p.metadata.name}`, { key: b.key })).json());
  });
});

describe('AnswerTexts bounds', () => {
  it('keeps at most 10,000 texts and 8 Mi characters in all, dropping the oldest, and no text over 16 Ki', () => {
    const texts = new AnswerTexts();
    const key = (i: number) => ({ kind: 'Policy', workspace: 'w', parent: '', name: `p${i}` });
    for (let i = 0; i < 10_050; i++) texts.set(key(i), 1, 'x');
    assert.deepEqual(texts.size(), { texts: 10_000, chars: 10_000 });
    assert.equal(texts.get(key(0), 1), undefined);
    assert.equal(texts.get(key(10_049), 1), 'x');
    const big = 'y'.repeat(16_000);
    for (let i = 0; i < 600; i++) texts.set(key(i), 2, big);
    assert.ok(texts.size().chars <= 8 * 1024 * 1024);
    assert.equal(texts.get(key(599), 2), big);
    // A replaced text is counted once; one over the limit is not kept, and leaves no older text behind.
    texts.set(key(599), 3, 'z');
    texts.set(key(598), 3, 'z'.repeat(16_385));
    assert.equal(texts.get(key(598), 2), undefined);
    assert.equal(texts.get(key(598), 3), undefined);
    assert.equal(texts.get(key(599), 3), 'z');
  });
});

describe('list pages kept as text', () => {
  let s: TestServer;
  let c: Tenant;
  let d: Tenant;
  before(async () => {
    s = await startTestServer();
    c = await newTenant(s, 'pages-c');
    d = await newTenant(s, 'pages-d');
  });
  after(() => s.close());

  /** The first page of two, read twice (the second answer is the kept page), with its cursor headers. */
  const page = async (key: string, version = '2025-01-01') => {
    const read = async () => {
      const r = await s.api('/policies?limit=2', { key, headers: { 'blaxel-version': version } });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
      return { body: await r.json(), next: r.headers.get('x-next-cursor'), link: r.headers.get('link') };
    };
    const first = await read();
    assert.deepEqual(await read(), first);
    return first;
  };
  const outputs = (p: { body: any[] }) => p.body.map((x) => `${x.metadata.name}:${x.spec.maxTokens.output}`);

  it('a page is answered again only until an object it lists, or may list, is written', async () => {
    for (const n of ['p1', 'p2', 'p3'])
      assert.equal(
        (await s.api('/policies', { method: 'POST', json: policy(n, 1), key: c.key })).status,
        200,
      );
    const first = await page(c.key);
    assert.deepEqual(outputs(first), ['p1:1', 'p2:1']);
    assert.ok(first.next, 'a next cursor');
    assert.match(first.link ?? '', /rel="next"/);
    // A write straight to the store (as a controller writes), a replace, a delete, a create before the page.
    await s.store.write([
      {
        op: 'update',
        key: { kind: 'Policy', workspace: c.home, parent: '', name: 'p1' },
        mutate: (cur) => ({
          ...cur.body,
          spec: { ...cur.body.spec, maxTokens: { output: 2, granularity: 'hour' } },
        }),
      },
    ]);
    assert.deepEqual(outputs(await page(c.key)), ['p1:2', 'p2:1']);
    assert.equal(
      (await s.api('/policies/p2', { method: 'PUT', json: policy('p2', 3), key: c.key })).status,
      200,
    );
    assert.deepEqual(outputs(await page(c.key)), ['p1:2', 'p2:3']);
    assert.equal((await s.api('/policies/p1', { method: 'DELETE', key: c.key })).status, 200);
    const afterDelete = await page(c.key);
    assert.deepEqual(outputs(afterDelete), ['p2:3', 'p3:1']);
    assert.notEqual(afterDelete.next, first.next, "the kept page's cursor went with it");
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('p0', 4), key: c.key })).status,
      200,
    );
    assert.deepEqual(outputs(await page(c.key)), ['p0:4', 'p2:3']);
  });

  it("another tenant's same page, and another API version's shape, are never answered from a kept page", async () => {
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('p2', 9), key: d.key })).status,
      200,
    );
    const mine = outputs(await page(c.key));
    assert.deepEqual(outputs(await page(d.key)), ['p2:9']);
    assert.deepEqual(outputs(await page(c.key)), mine);
    const enveloped = await page(c.key, '2026-04-28');
    assert.deepEqual(Object.keys(enveloped.body), ['data', 'meta']);
    assert.deepEqual(outputs({ body: enveloped.body.data }), mine);
  });
});
