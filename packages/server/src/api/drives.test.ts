// /v0/drives: the Drive kind's CRUD as the SDK calls it (defaults, by-external-id, versioned lists, immutable
// size, at most three permissions) and the capacity it shares with volumes.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('drives', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ BERTH_VOLUME_CAPACITY_MB: '100' });
  });
  after(() => s.close());

  it('a drive is created with its defaults, found by external id, listed in both list shapes, size immutable', async () => {
    const r = await s.api('/drives', {
      method: 'POST',
      json: {
        metadata: { name: 'shared', externalId: 'ext-1', labels: { a: 'b' } },
        spec: { size: 8, permissions: [{ labels: { team: 'red' }, mode: 'read', path: '/data' }] },
      },
    });
    const d = await r.json();
    assert.equal(r.status, 200, JSON.stringify(d));
    assert.equal(d.spec.size, 8);
    assert.ok(d.spec.region);
    assert.deepEqual(d.spec.permissions, [{ labels: { team: 'red' }, mode: 'read', path: '/data' }]);
    const byExt = await s.api('/drives/by-external-id/ext-1');
    assert.equal((await byExt.json()).metadata.name, 'shared');
    const bare = await (await s.api('/drives')).json();
    assert.deepEqual(
      bare.map((x: any) => x.metadata.name),
      ['shared'],
    );
    const env = await (await s.api('/drives', { headers: { 'blaxel-version': '2026-04-28' } })).json();
    assert.deepEqual(
      env.data.map((x: any) => x.metadata.name),
      ['shared'],
    );
    const resize = await s.api('/drives/shared', {
      method: 'PUT',
      json: { metadata: { name: 'shared' }, spec: { ...d.spec, size: 16 } },
    });
    assert.equal(resize.status, 422);
  });

  it('more than three permissions is a 422, and a drive counts in the volume capacity', async () => {
    const many = Array.from({ length: 4 }, () => ({ mode: 'read' }));
    const r = await s.api('/drives', {
      method: 'POST',
      json: { metadata: { name: 'many' }, spec: { size: 1, permissions: many } },
    });
    assert.equal(r.status, 422);
    const big = await s.api('/drives', {
      method: 'POST',
      json: { metadata: { name: 'big' }, spec: { size: 200 } },
    });
    assert.equal(big.status, 429);
    assert.match((await big.json()).detail, /volume space of this server is full/);
  });

  it("the service's S3 routes answer a 501 problem saying to mount the drive: access-token (after the drive's 404) and jwks.json (without a credential)", async () => {
    const missing = await s.api('/drives/nope/access-token', { method: 'POST' });
    assert.equal(missing.status, 404);
    assert.equal(
      (await s.api('/drives', { method: 'POST', json: { metadata: { name: 'tok' }, spec: { size: 1 } } }))
        .status,
      200,
    );
    const token = await s.api('/drives/tok/access-token', { method: 'POST' });
    assert.equal(token.status, 501);
    assert.match(token.headers.get('content-type') ?? '', /problem\+json/);
    assert.match((await token.json()).detail, /no S3 endpoint for drives: mount the drive into a sandbox/);
    const jwks = await fetch(`${s.url}/v0/drives/jwks.json`);
    assert.equal(jwks.status, 501);
    assert.match((await jwks.json()).detail, /no drive access token is ever issued/);
  });
});
