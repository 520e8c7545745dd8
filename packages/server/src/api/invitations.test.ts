// Membership across tenants needs consent: an admin of one tenant's workspace can only invite a principal of
// another tenant, and the invitation grants nothing until the invitee (or its home workspace's admin) accepts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';
import { newTenant, type Tenant } from '../test-support/tenants.js';

describe('invitations across tenants', () => {
  let s: TestServer;
  let acme: Tenant;
  let beta: Tenant;

  before(async () => {
    s = await startTestServer();
    acme = await newTenant(s, 'acme');
    beta = await newTenant(s, 'beta');
  });
  after(() => s.close());

  const names = async (key: string) =>
    (await (await s.api('/workspaces', { key })).json()).map((w: any) => w.name).sort();

  it("does not make another tenant's principal a member: the PUT only invites, and the invitation grants nothing", async () => {
    assert.equal(
      (await s.api('/workspaces', { method: 'POST', json: { name: 'trap' }, key: beta.key })).status,
      200,
    );
    const put = await s.api(`/workspaces/trap/members/${acme.id}`, {
      method: 'PUT',
      json: { role: 'admin' },
      key: beta.key,
    });
    assert.equal(put.status, 202);
    const inv = await put.json();
    assert.equal(inv.status, 'PENDING');
    assert.equal(inv.role, 'admin');
    const post = await s.api('/workspaces/trap/members', {
      method: 'POST',
      json: { subject: acme.id, role: 'viewer' },
      key: beta.key,
    });
    assert.equal(post.status, 202, 'the collection form invites too');

    assert.deepEqual(await names(acme.key), ['acme'], 'not a member');
    const inTrap = { key: acme.key, headers: { 'x-service-workspace': 'trap' } };
    assert.equal((await s.api('/policies', inTrap)).status, 404);
    const members = await (await s.api('/workspaces/trap/members', { key: beta.key })).json();
    assert.deepEqual(
      members.map((m: any) => m.subject),
      [beta.id],
    );
    const pending = await (await s.api('/workspaces/trap/invitations', { key: beta.key })).json();
    assert.deepEqual(
      pending.map((i: any) => [i.subject, i.role]),
      [[acme.id, 'viewer']],
    );

    // Visible to the invitee; nobody else may accept it for the invitee.
    const mine = await (await s.api('/invitations', { key: acme.key })).json();
    assert.deepEqual(
      mine.map((i: any) => [i.workspace, i.role]),
      [['trap', 'viewer']],
    );
    const forged = await s.api(`/workspaces/trap/invitations/${acme.id}/accept`, {
      method: 'POST',
      key: beta.key,
    });
    assert.equal(forged.status, 404);
    assert.equal(
      (await s.api(`/workspaces/trap/invitations/${acme.id}/accept`, { method: 'POST' })).status,
      404,
      'not the operator either',
    );
    assert.deepEqual(await (await s.api(`/invitations?subject=${acme.id}`, { key: beta.key })).json(), []);
    assert.deepEqual(await names(acme.key), ['acme']);

    const ok = await s.api(`/workspaces/trap/invitations/${acme.id}/accept`, {
      method: 'POST',
      key: acme.key,
    });
    assert.equal(ok.status, 200);
    assert.equal((await ok.json()).role, 'viewer');
    assert.deepEqual(await names(acme.key), ['acme', 'trap']);
    assert.equal((await s.api('/policies', inTrap)).status, 200);
    assert.deepEqual(await (await s.api('/invitations', { key: acme.key })).json(), []);
  });

  it('lets the admin of the home workspace accept for its account, and the invitee decline', async () => {
    const inAcme = { 'x-service-workspace': 'acme' };
    const bot = await (
      await s.api('/service_accounts', {
        method: 'POST',
        json: { name: 'bot' },
        key: acme.key,
        headers: inAcme,
      })
    ).json();
    assert.equal(
      (await s.api('/workspaces', { method: 'POST', json: { name: 'beta-2' }, key: beta.key })).status,
      200,
    );
    const put = (ws: string) =>
      s.api(`/workspaces/${ws}/members/${bot.client_id}`, {
        method: 'PUT',
        json: { role: 'member' },
        key: beta.key,
      });
    assert.equal((await put('beta-2')).status, 202);
    const listed = await (await s.api(`/invitations?subject=${bot.client_id}`, { key: acme.key })).json();
    assert.deepEqual(
      listed.map((i: any) => i.workspace),
      ['beta-2'],
    );
    const ok = await s.api(`/workspaces/beta-2/invitations/${bot.client_id}/accept`, {
      method: 'POST',
      key: acme.key,
    });
    assert.equal(ok.status, 200);

    assert.equal(
      (await s.api('/workspaces', { method: 'POST', json: { name: 'beta-3' }, key: beta.key })).status,
      200,
    );
    assert.equal((await put('beta-3')).status, 202);
    const decline = await s.api(`/workspaces/beta-3/invitations/${bot.client_id}`, {
      method: 'DELETE',
      key: acme.key,
    });
    assert.equal(decline.status, 200);
    const accept = await s.api(`/workspaces/beta-3/invitations/${bot.client_id}/accept`, {
      method: 'POST',
      key: acme.key,
    });
    assert.equal(accept.status, 404, 'a declined invitation is gone');
  });

  it("adds the admin's own tenant's service accounts directly", async () => {
    const inAcme = { 'x-service-workspace': 'acme' };
    const sa = await (
      await s.api('/service_accounts', {
        method: 'POST',
        json: { name: 'ci' },
        key: acme.key,
        headers: inAcme,
      })
    ).json();
    assert.equal(
      (await s.api('/workspaces', { method: 'POST', json: { name: 'acme-ci' }, key: acme.key })).status,
      200,
    );
    const put = await s.api(`/workspaces/acme-ci/members/${sa.client_id}`, {
      method: 'PUT',
      json: { role: 'member' },
      key: acme.key,
    });
    assert.equal(put.status, 200);
    assert.equal((await put.json()).role, 'member');
  });
});
