import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('service accounts and API keys', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  async function newAccount(body: Record<string, unknown> = { name: 'ci' }) {
    const r = await s.api('/service_accounts', { method: 'POST', json: body });
    assert.equal(r.status, 200);
    return r.json();
  }

  async function newKey(clientId: string, body?: Record<string, unknown>) {
    const r = await s.api(`/service_accounts/${clientId}/api_keys`, { method: 'POST', json: body ?? {} });
    assert.equal(r.status, 200);
    return r.json();
  }

  it('creates a service account whose secret is shown only on creation', async () => {
    const sa = await newAccount({ name: 'ci', description: 'pipeline' });
    assert.match(sa.client_id, /^sa-/);
    assert.ok(sa.client_secret.length > 40);
    assert.equal(sa.name, 'ci');
    assert.equal(sa.description, 'pipeline');
    assert.ok(sa.created_at && sa.updated_at);
    const got = await (await s.api(`/service_accounts/${sa.client_id}`)).json();
    assert.equal(got.client_secret, undefined);
    const list = await (await s.api('/service_accounts')).json();
    assert.ok(list.some((x: any) => x.client_id === sa.client_id));
    assert.ok(list.every((x: any) => x.client_secret === undefined));
    const upd = await s.api(`/service_accounts/${sa.client_id}`, {
      method: 'PUT',
      json: { description: 'changed' },
    });
    assert.equal((await upd.json()).description, 'changed');
    assert.ok(!s.logs().includes(sa.client_secret));
  });

  it('creates an API key that works, and lists keys without their values', async () => {
    const sa = await newAccount();
    const k = await newKey(sa.client_id, { name: 'deploy' });
    assert.ok(k.apiKey.startsWith('bk_'));
    assert.equal(k.name, 'deploy');
    assert.equal(k.sub, sa.client_id);
    assert.equal(k.sub_type, 'service_account');
    assert.ok(k.id && k.createdAt && k.updatedAt && k.createdBy && k.updatedBy);
    assert.ok(!('expires_in' in k), 'a key without expires_in never expires');
    assert.equal((await s.api('/policies', { key: k.apiKey })).status, 200);
    const list = await (await s.api(`/service_accounts/${sa.client_id}/api_keys`)).json();
    assert.equal(list.length, 1);
    assert.equal(list[0].id, k.id);
    assert.ok(!('apiKey' in list[0]));
    assert.ok(!JSON.stringify(list).includes(k.apiKey));
    assert.ok(!s.logs().includes(k.apiKey));
  });

  it('accepts an empty body for a key', async () => {
    const sa = await newAccount();
    const r = await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST' });
    assert.equal(r.status, 200);
    assert.ok((await r.json()).apiKey);
  });

  it('stops accepting a key once expires_in has passed', async () => {
    const sa = await newAccount();
    const k = await newKey(sa.client_id, { expires_in: '2s' });
    assert.equal(k.expires_in, '2s');
    assert.equal((await s.api('/policies', { key: k.apiKey })).status, 200);
    let status = 200;
    for (let i = 0; i < 100 && status === 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await s.api('/policies', { key: k.apiKey })).status;
    }
    assert.equal(status, 401);
  });

  it('rejects an expires_in that is not a duration with 422 and a pointer', async () => {
    const sa = await newAccount();
    for (const expires_in of ['forever', '0s', '10y']) {
      const r = await s.api(`/service_accounts/${sa.client_id}/api_keys`, {
        method: 'POST',
        json: { expires_in },
      });
      assert.equal(r.status, 422, expires_in);
      const p = await r.json();
      assert.equal(p.error, 'VALIDATION_FAILED');
      assert.equal(p.errors[0].pointer, '/expires_in');
    }
  });

  it('revokes a deleted key at once', async () => {
    const sa = await newAccount();
    const k = await newKey(sa.client_id);
    assert.equal((await s.api('/policies', { key: k.apiKey })).status, 200);
    const d = await s.api(`/service_accounts/${sa.client_id}/api_keys/${k.id}`, { method: 'DELETE' });
    assert.equal(d.status, 200);
    assert.equal((await s.api('/policies', { key: k.apiKey })).status, 401);
    const again = await s.api(`/service_accounts/${sa.client_id}/api_keys/${k.id}`, { method: 'DELETE' });
    assert.equal(again.status, 404);
  });

  it('deletes a service account together with its keys', async () => {
    const sa = await newAccount();
    const k1 = await newKey(sa.client_id);
    const k2 = await newKey(sa.client_id, { expires_in: '30d' });
    assert.equal((await s.api('/policies', { key: k1.apiKey })).status, 200);
    assert.equal((await s.api(`/service_accounts/${sa.client_id}`, { method: 'DELETE' })).status, 200);
    assert.equal((await s.api('/policies', { key: k1.apiKey })).status, 401);
    assert.equal((await s.api('/policies', { key: k2.apiKey })).status, 401);
    assert.equal((await s.api(`/service_accounts/${sa.client_id}`)).status, 404);
    assert.equal((await s.api(`/service_accounts/${sa.client_id}/api_keys`)).status, 404);
  });

  it('refuses to delete the last admin of a workspace', async () => {
    const list = await (await s.api('/service_accounts')).json();
    const admin = list.find((x: any) => x.name === 'admin');
    const r = await s.api(`/service_accounts/${admin.client_id}`, { method: 'DELETE' });
    assert.equal(r.status, 409);
    assert.equal((await r.json()).error, 'INVALID_STATE');
  });

  it('validates the body of a new service account', async () => {
    const r = await s.api('/service_accounts', {
      method: 'POST',
      json: { description: 'no name', role: 'root' },
    });
    assert.equal(r.status, 422);
    const pointers = (await r.json()).errors.map((e: any) => e.pointer).sort();
    assert.deepEqual(pointers, ['/name', '/role']);
  });

  it('lets only admins manage service accounts', async () => {
    const sa = await newAccount({ name: 'member-one', role: 'member' });
    const k = await newKey(sa.client_id);
    const r = await s.api('/service_accounts', { key: k.apiKey });
    assert.equal(r.status, 403);
    assert.equal((await r.json()).error, 'FORBIDDEN');
    const c = await s.api(`/service_accounts/${sa.client_id}/api_keys`, {
      method: 'POST',
      json: {},
      key: k.apiKey,
    });
    assert.equal(c.status, 403);
  });
});
