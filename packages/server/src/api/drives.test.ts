import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('drives are refused clearly', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('every drives verb answers 501 problem+json saying drives are not available, not a 404', async () => {
    for (const [path, method] of [
      ['/drives', 'GET'],
      ['/drives', 'POST'],
      ['/drives/shared', 'GET'],
      ['/drives/by-external-id/x', 'GET'],
    ]) {
      const r = await s.api(path, {
        method,
        ...(method === 'POST' ? { json: { metadata: { name: 'd' } } } : {}),
      });
      assert.equal(r.status, 501, `${method} ${path}`);
      assert.match(r.headers.get('content-type') ?? '', /problem\+json/);
      const b = await r.json();
      assert.equal(b.error, 'NOT_IMPLEMENTED');
      assert.match(b.detail, /drives are not available/);
    }
  });
});
