// Versioned lists over plain HTTP: `Blaxel-Version` from 2026-04-28 on makes every list `{data, meta}` whose
// cursors walk all pages; without it (or with an older date) lists stay bare arrays with the cursor in headers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('API versions of lists', () => {
  let s: TestServer;
  const names = ['va', 'vb', 'vc', 'vd', 've'];
  before(async () => {
    s = await startTestServer();
    for (const name of names) {
      const r = await s.api('/policies', {
        method: 'POST',
        json: { metadata: { name }, spec: { type: 'flavor', flavors: [{ name: 'cpu' }] } },
      });
      assert.equal(r.status, 200, await r.text());
    }
  });
  after(() => s.close());

  const get = (path: string, version?: string) =>
    s.api(path, { headers: version ? { 'blaxel-version': version } : {} });

  it('answers {data, meta} from 2026-04-28 on, and the cursors walk every page', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r = await get(`/policies?limit=2${cursor ? `&cursor=${cursor}` : ''}`, '2026-04-28');
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      const body = await r.json();
      assert.ok(Array.isArray(body.data), JSON.stringify(body));
      assert.equal(typeof body.meta.hasMore, 'boolean');
      assert.equal(body.meta.hasMore, body.meta.nextCursor !== undefined);
      seen.push(...body.data.map((p: any) => p.metadata.name));
      cursor = body.meta.nextCursor;
      pages++;
    } while (cursor);
    assert.deepEqual(seen, names);
    assert.equal(pages, 3);
  });

  it('a later date selects the newest version; an earlier one or none keeps the bare array', async () => {
    const future = await (await get('/policies', '2031-01-01')).json();
    assert.deepEqual(Object.keys(future).sort(), ['data', 'meta']);
    for (const v of [undefined, '2026-04-27', '2024-01-01']) {
      const r = await get('/policies?limit=2', v);
      const body = await r.json();
      assert.ok(Array.isArray(body), `${v}: ${JSON.stringify(body)}`);
      assert.equal(body.length, 2);
      assert.ok(r.headers.get('x-next-cursor'));
    }
  });

  it('lists that are not of a kind take the version too (service accounts, members)', async () => {
    for (const path of ['/service_accounts', '/workspaces/default/members']) {
      const body = await (await get(path, '2026-04-28')).json();
      assert.ok(Array.isArray(body.data), `${path}: ${JSON.stringify(body)}`);
      assert.deepEqual(body.meta, { hasMore: false });
      assert.ok(Array.isArray(await (await get(path)).json()), path);
    }
  });

  it('a header that is not a date is a 400 naming it', async () => {
    const r = await get('/policies', 'yesterday');
    assert.equal(r.status, 400);
    assert.match((await r.json()).detail, /Blaxel-Version/);
  });

  it('an error on a list stays a problem, not wrapped', async () => {
    const r = await get('/policies?limit=0', '2026-04-28');
    assert.equal(r.status, 400);
    const body = await r.json();
    assert.equal(body.data, undefined);
    assert.equal(body.status, 400);
  });
});
