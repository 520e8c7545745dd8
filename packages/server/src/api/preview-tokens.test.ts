import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';
import { verifyPreviewToken } from '../auth/preview-token.js';

describe('preview tokens', () => {
  let s: TestServer;
  const tokens = '/sandboxes/box/previews/web/tokens';
  const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();

  before(async () => {
    s = await startTestServer();
    assert.equal(
      (await s.api('/sandboxes', { method: 'POST', json: { metadata: { name: 'box' }, spec: {} } })).status,
      200,
    );
    const p = await s.api('/sandboxes/box/previews', {
      method: 'POST',
      json: { metadata: { name: 'web' }, spec: { port: 3000 } },
    });
    assert.equal(p.status, 200);
  });
  after(() => s.close());

  it('POST returns the token once, with the shape the SDK reads', async () => {
    const expiresAt = inAnHour();
    const r = await s.api(tokens, {
      method: 'POST',
      json: { metadata: { name: 'first' }, spec: { expiresAt } },
    });
    const t = await r.json();
    assert.equal(r.status, 200, JSON.stringify(t));
    assert.deepEqual(t.metadata, {
      name: 'first',
      previewName: 'web',
      resourceName: 'box',
      resourceType: 'Sandbox',
      workspace: 'default',
    });
    assert.match(t.spec.token, /^bpt_[A-Za-z0-9_-]{43}$/);
    assert.equal(t.spec.expiresAt, expiresAt);
    assert.equal(t.spec.expired, false);
  });

  it('GET lists tokens as a bare array without their values', async () => {
    const list = await (await s.api(tokens)).json();
    assert.ok(Array.isArray(list));
    assert.deepEqual(
      list.map((t: any) => [t.metadata.name, 'token' in t.spec, t.spec.expired]),
      [['first', false, false]],
    );
  });

  it('a token opens the preview it was issued for, and no other', async () => {
    const r = await s.api(tokens, { method: 'POST', json: { spec: { expiresAt: inAnHour() } } });
    const t = await r.json();
    assert.match(t.metadata.name, /^token-[0-9a-f]{8}$/);
    const db = s.store;
    assert.equal(await verifyPreviewToken(db, 'default', 'box', 'web', t.spec.token, Date.now()), true);
    assert.equal(await verifyPreviewToken(db, 'default', 'box', 'other', t.spec.token, Date.now()), false);
    assert.equal(await verifyPreviewToken(db, 'default', 'box', 'web', 'bpt_forged', Date.now()), false);
    assert.equal(
      await verifyPreviewToken(db, 'default', 'box', 'web', t.spec.token, Date.now() + 7_200_000),
      false,
    );
    assert.equal((await s.api(`${tokens}/${t.metadata.name}`, { method: 'DELETE' })).status, 200);
  });

  it('rejects a duplicate name (409), a past expiry and a missing one (422)', async () => {
    const dup = await s.api(tokens, {
      method: 'POST',
      json: { metadata: { name: 'first' }, spec: { expiresAt: inAnHour() } },
    });
    assert.equal(dup.status, 409);
    assert.equal((await dup.json()).error, 'PREVIEW_TOKEN_ALREADY_EXISTS');
    const past = await s.api(tokens, {
      method: 'POST',
      json: { spec: { expiresAt: '2001-01-01T00:00:00Z' } },
    });
    assert.equal(past.status, 422);
    assert.deepEqual((await past.json()).errors, [
      { pointer: '/spec/expiresAt', message: 'must be in the future' },
    ]);
    const none = await s.api(tokens, { method: 'POST', json: { spec: {} } });
    assert.equal(none.status, 422);
    assert.equal((await none.json()).errors[0].pointer, '/spec/expiresAt');
  });

  it('answers 404 when the preview or the sandbox does not exist', async () => {
    for (const path of ['/sandboxes/box/previews/nope/tokens', '/sandboxes/nope/previews/web/tokens']) {
      assert.equal((await s.api(path)).status, 404, path);
      assert.equal(
        (await s.api(path, { method: 'POST', json: { spec: { expiresAt: inAnHour() } } })).status,
        404,
        path,
      );
    }
    assert.equal((await s.api(`${tokens}/nope`, { method: 'DELETE' })).status, 404);
  });

  it('a viewer may list tokens but not create one (403); no credential is 401', async () => {
    const sa = await (
      await s.api('/service_accounts', { method: 'POST', json: { name: 'reader', role: 'viewer' } })
    ).json();
    const key = (
      await (await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} })).json()
    ).apiKey;
    assert.equal((await s.api(tokens, { key })).status, 200);
    const denied = await s.api(tokens, { method: 'POST', key, json: { spec: { expiresAt: inAnHour() } } });
    assert.equal(denied.status, 403);
    assert.equal((await s.api(tokens, { key: null })).status, 401);
  });

  it('DELETE removes one token and returns it without its value', async () => {
    const r = await s.api(`${tokens}/first`, { method: 'DELETE' });
    const t = await r.json();
    assert.equal(r.status, 200);
    assert.equal(t.metadata.name, 'first');
    assert.equal(t.spec.token, undefined);
    assert.deepEqual(await (await s.api(tokens)).json(), []);
  });

  it('deleting the preview deletes its tokens; deleting the sandbox deletes its previews', async () => {
    await s.api(tokens, {
      method: 'POST',
      json: { metadata: { name: 'keep' }, spec: { expiresAt: inAnHour() } },
    });
    const d = await s.api('/sandboxes/box/previews/web', { method: 'DELETE' });
    assert.equal((await d.json()).status, 'DELETING');
    const after = await s.api(tokens);
    // The preview may still be finishing its deletion (its tokens are gone) or be removed already.
    if (after.status === 200) assert.deepEqual(await after.json(), []);
    else assert.equal(after.status, 404);
    const again = await s.api(tokens, { method: 'POST', json: { spec: { expiresAt: inAnHour() } } });
    assert.ok([404, 409].includes(again.status));

    await s.api('/sandboxes/box/previews', {
      method: 'POST',
      json: { metadata: { name: 'api' }, spec: { port: 8080 } },
    });
    await s.api('/sandboxes/box/previews/api/tokens', {
      method: 'POST',
      json: { spec: { expiresAt: inAnHour() } },
    });
    assert.equal((await s.api('/sandboxes/box', { method: 'DELETE' })).status, 200);
    assert.equal((await s.api('/sandboxes/box/previews/api')).status, 404);
    assert.equal((await s.api('/sandboxes/box/previews/api/tokens')).status, 404);
  });
});
