// A second tenant on a test server: a home workspace of its own whose only admin is a service account homed
// there. The operator's admin sets it up and then leaves, so afterwards the two tenants share nothing.
import assert from 'node:assert/strict';
import type { TestServer } from './server.js';

export interface Tenant {
  /** The tenant's own workspace, where its admin account is homed. */
  home: string;
  /** Client ID of its admin service account. */
  id: string;
  /** An API key of that account. */
  key: string;
}

export async function newTenant(s: TestServer, home: string): Promise<Tenant> {
  const ok = async (res: Response) => {
    const body = await res.json();
    assert.ok(res.ok, `${res.status} ${JSON.stringify(body)}`);
    return body;
  };
  const adminId = (await ok(await s.api('/service_accounts'))).find((x: any) => x.name === 'admin').client_id;
  await ok(await s.api('/workspaces', { method: 'POST', json: { name: home } }));
  const headers = { 'x-service-workspace': home };
  const sa = await ok(
    await s.api('/service_accounts', {
      method: 'POST',
      json: { name: `${home}-admin`, role: 'admin' },
      headers,
    }),
  );
  const k = await ok(
    await s.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {}, headers }),
  );
  await ok(await s.api(`/workspaces/${home}/members/${adminId}`, { method: 'DELETE' }));
  return { home, id: sa.client_id, key: k.apiKey };
}
