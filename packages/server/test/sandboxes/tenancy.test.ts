// Two tenants on one server, one trying to take the other's sandbox address: `sbx-<sandbox>-<workspace>` of
// `app` in `acme-eu` is also what `app-acme` in `eu` would give. The address stays with whoever holds it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { getWithHost, type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

const spec = { runtime: { memory: TEST_MEMORY_MB } };

describe('sandbox addresses across tenants', () => {
  let s: SandboxServer;
  let acme: Tenant;
  let beta: Tenant;
  const host = 'sbx-app-acme-eu.local.sbx.test';

  before(async () => {
    s = await startSandboxServer({ BERTH_INFERENCE_HOST: 'sbx.test' });
    acme = await newTenant(s, 'acme');
    beta = await newTenant(s, 'beta');
    assert.equal(
      (await s.api('/workspaces', { method: 'POST', json: { name: 'acme-eu' }, key: acme.key })).status,
      200,
    );
    const created = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'app' }, spec },
      key: acme.key,
      headers: { 'x-service-workspace': 'acme-eu' },
    });
    const body = await created.json();
    assert.equal(created.status, 200, JSON.stringify(body));
    assert.equal(body.metadata.url, `http://${host}:${s.port}`);
  });
  after(() => s?.close());

  it("refuses another tenant's sandbox whose address label would equal an existing one, by POST and by PUT", async () => {
    assert.equal(
      (await s.api('/workspaces', { method: 'POST', json: { name: 'eu' }, key: beta.key })).status,
      200,
    );
    const inEu = { key: beta.key, headers: { 'x-service-workspace': 'eu' } };
    const post = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'app-acme' }, spec },
      ...inEu,
    });
    const p = await post.json();
    assert.equal(post.status, 409, JSON.stringify(p));
    assert.equal(p.error, 'CONFLICT');
    assert.match(p.detail, /another workspace/);
    assert.doesNotMatch(p.detail, /"app"|of acme-eu/, 'the owner is not named to another tenant');
    const put = await s.api('/sandboxes/app-acme', { method: 'PUT', json: { metadata: {}, spec }, ...inEu });
    assert.equal(put.status, 409);
    assert.equal((await s.api('/sandboxes/app-acme', inEu)).status, 404, 'nothing was created');
  });

  it('keeps routing the address to the tenant that holds it', async () => {
    const asAcme = await getWithHost(`${s.url}/health`, `${host}:${s.port}`, {
      'x-blaxel-authorization': `Bearer ${acme.key}`,
    });
    assert.equal(asAcme.status, 200, asAcme.body);
    const asBeta = await getWithHost(`${s.url}/health`, host, {
      'x-blaxel-authorization': `Bearer ${beta.key}`,
    });
    assert.equal(asBeta.status, 404, asBeta.body);
    assert.match(
      JSON.parse(asBeta.body).detail,
      /workspace acme-eu not found/,
      'routed to acme-eu, not to eu',
    );
  });
});
