import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { goneRecordOf } from '../runtime/images/gone-record.js';
import { startTestServer, type TestServer } from '../test-support/server.js';

const policy = (name: string) => ({
  metadata: { name },
  spec: { type: 'location', locations: [{ name: 'local', type: 'region' }] },
});

describe('workspaces, members and the role matrix', () => {
  let s: TestServer;
  let adminId: string;
  const keyOf: Record<string, { key: string; id: string }> = {};

  before(async () => {
    s = await startTestServer();
    const list = await (await s.api('/service_accounts')).json();
    adminId = list.find((x: any) => x.name === 'admin').client_id;
    for (const role of ['viewer', 'member', 'admin']) {
      const sa = await (
        await s.api('/service_accounts', { method: 'POST', json: { name: role, role } })
      ).json();
      const k = await (
        await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} })
      ).json();
      keyOf[role] = { key: k.apiKey, id: sa.client_id };
    }
    assert.equal((await s.api('/policies', { method: 'POST', json: policy('shared') })).status, 200);
  });
  after(() => s.close());

  it('lets a viewer read but not write', async () => {
    const key = keyOf.viewer.key;
    assert.equal((await s.api('/policies', { key })).status, 200);
    assert.equal((await s.api('/policies/shared', { key })).status, 200);
    const w = await s.api('/policies', { method: 'POST', json: policy('by-viewer'), key });
    assert.equal(w.status, 403);
    assert.equal((await w.json()).error, 'FORBIDDEN');
    assert.equal((await s.api('/policies/shared', { method: 'DELETE', key })).status, 403);
  });

  it('lets a member write but not see secrets; an admin may', async () => {
    const key = keyOf.member.key;
    assert.equal((await s.api('/policies', { method: 'POST', json: policy('by-member'), key })).status, 200);
    const sec = await s.api('/policies/shared?show_secrets=true', { key });
    assert.equal(sec.status, 403);
    assert.equal((await sec.json()).error, 'FORBIDDEN');
    assert.equal((await s.api('/policies/shared?show_secrets=true', { key: keyOf.admin.key })).status, 200);
    assert.equal((await s.api('/service_accounts', { key })).status, 403);
    assert.equal((await s.api('/service_accounts', { key: keyOf.admin.key })).status, 200);
  });

  it('hides another workspace behind 404, for the workspace and its resources', async () => {
    const c = await s.api('/workspaces', { method: 'POST', json: { name: 'ws2', displayName: 'Second' } });
    assert.equal(c.status, 200);
    assert.equal((await c.json()).name, 'ws2');
    const ws2 = { 'x-service-workspace': 'ws2' };
    assert.equal(
      (await s.api('/policies', { method: 'POST', json: policy('secret-plan'), headers: ws2 })).status,
      200,
    );
    assert.equal((await s.api('/policies/secret-plan', { headers: ws2 })).status, 200);
    assert.equal(
      (await s.api('/policies/secret-plan')).status,
      404,
      'a resource lives in one workspace only',
    );

    const outsider = keyOf.member.key;
    for (const path of ['/policies/secret-plan', '/policies']) {
      const r = await s.api(path, { key: outsider, headers: ws2 });
      assert.equal(r.status, 404, path);
      const p = await r.json();
      assert.equal(p.error, 'NOT_FOUND');
      assert.match(p.detail, /workspace ws2 not found/);
    }
    assert.equal((await s.api('/workspaces/ws2', { key: outsider })).status, 404);
    const mine = await (await s.api('/workspaces', { key: outsider })).json();
    assert.deepEqual(
      mine.map((w: any) => w.name),
      ['default'],
    );
    const adminSees = await (await s.api('/workspaces')).json();
    assert.deepEqual(adminSees.map((w: any) => w.name).sort(), ['default', 'ws2']);

    // Made a viewer of ws2, the same principal reads there and still cannot write.
    const add = await s.api(`/workspaces/ws2/members/${keyOf.member.id}`, {
      method: 'PUT',
      json: { role: 'viewer' },
    });
    assert.equal(add.status, 200);
    assert.equal((await s.api('/policies/secret-plan', { key: outsider, headers: ws2 })).status, 200);
    const w = await s.api('/policies', { method: 'POST', json: policy('nope'), key: outsider, headers: ws2 });
    assert.equal(w.status, 403);
    const members = await (await s.api('/workspaces/ws2/members')).json();
    assert.deepEqual(
      members.map((m: any) => [m.subject, m.role]).sort(),
      [
        [adminId, 'admin'],
        [keyOf.member.id, 'viewer'],
      ].sort(),
    );
    assert.equal(
      (await s.api(`/workspaces/ws2/members/${keyOf.member.id}`, { method: 'DELETE' })).status,
      200,
    );
    assert.equal((await s.api('/policies', { key: outsider, headers: ws2 })).status, 404);
  });

  it('refuses to remove or demote the last admin of a workspace', async () => {
    assert.equal((await s.api('/workspaces', { method: 'POST', json: { name: 'ws3' } })).status, 200);
    const del = await s.api(`/workspaces/ws3/members/${adminId}`, { method: 'DELETE' });
    assert.equal(del.status, 409);
    assert.equal((await del.json()).error, 'INVALID_STATE');
    const demote = await s.api(`/workspaces/ws3/members/${adminId}`, {
      method: 'PUT',
      json: { role: 'member' },
    });
    assert.equal(demote.status, 409);
    // With a second admin the first may go.
    const add = await s.api('/workspaces/ws3/members', {
      method: 'POST',
      json: { subject: keyOf.admin.id, role: 'admin' },
    });
    assert.equal(add.status, 200);
    assert.equal((await s.api(`/workspaces/ws3/members/${adminId}`, { method: 'DELETE' })).status, 200);
    assert.equal((await s.api('/workspaces/ws3')).status, 404);
    assert.equal((await s.api('/workspaces/ws3', { key: keyOf.admin.key })).status, 200);
  });

  it('lets only an admin of the workspace change members, rename or delete it', async () => {
    const viewer = keyOf.viewer.key;
    const r = await s.api(`/workspaces/default/members/${keyOf.viewer.id}`, {
      method: 'PUT',
      json: { role: 'admin' },
      key: viewer,
    });
    assert.equal(r.status, 403);
    assert.equal((await s.api('/workspaces/default/members', { key: viewer })).status, 200);
    assert.equal((await s.api('/workspaces/default', { method: 'DELETE', key: viewer })).status, 403);
    const put = await s.api('/workspaces/ws2', { method: 'PUT', json: { displayName: 'Renamed' } });
    assert.equal(put.status, 200);
    assert.equal((await put.json()).displayName, 'Renamed');
  });

  it('deletes a workspace only when it is empty', async () => {
    const ws2 = { 'x-service-workspace': 'ws2' };
    const busy = await s.api('/workspaces/ws2', { method: 'DELETE' });
    assert.equal(busy.status, 409);
    assert.equal((await busy.json()).error, 'INVALID_STATE');
    assert.equal((await s.api('/policies/secret-plan', { method: 'DELETE', headers: ws2 })).status, 200);
    // The record of image names it let go of (written by a cluster's leader) goes with it: a new ws2 has none.
    const record = goneRecordOf(s.store, s.store);
    await record.write('ws2', { 'docker.io/local/app:1 0123': '2026-11-27T00:00:00.000Z' });
    assert.ok((await record.read()).ws2);
    assert.equal((await s.api('/workspaces/ws2', { method: 'DELETE' })).status, 200);
    assert.equal((await s.api('/workspaces/ws2')).status, 404);
    assert.equal((await record.read()).ws2, undefined);
    assert.equal((await s.api('/policies', { headers: ws2 })).status, 404);
  });

  it('validates workspace bodies and refuses a taken name', async () => {
    const bad = await s.api('/workspaces', { method: 'POST', json: { name: 'Not_A_Label' } });
    assert.equal(bad.status, 422);
    const p = await bad.json();
    assert.equal(p.error, 'VALIDATION_FAILED');
    assert.equal(p.errors[0].pointer, '/name');
    const taken = await s.api('/workspaces', {
      method: 'POST',
      json: { name: 'default' },
      key: keyOf.viewer.key,
    });
    assert.equal(taken.status, 409);
    assert.equal((await taken.json()).error, 'WORKSPACE_ALREADY_EXISTS');
    const role = await s.api(`/workspaces/default/members/${keyOf.viewer.id}`, {
      method: 'PUT',
      json: { role: 'owner' },
    });
    assert.equal(role.status, 422);
    assert.equal((await role.json()).errors[0].pointer, '/role');
  });
});
