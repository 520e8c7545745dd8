// The whole server on PostgreSQL: the API's writes and reads, a sandbox created and run, a second server on the same
// database serving what the first wrote, a server with another master key refused, a restart losing nothing.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { testPostgres } from '../../src/test-support/store-drivers.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { startTestServer, type TestServer } from '../../src/test-support/server.js';
import { exec, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const MASTER_KEY = randomBytes(32).toString('base64');

describe('berth serve on PostgreSQL', () => {
  let url: string;
  let a: SandboxServer;
  let b: TestServer;
  before(async () => {
    url = await (await testPostgres()).database();
    const env = { BERTH_DATABASE_URL: url, BERTH_MASTER_KEY: MASTER_KEY };
    a = await startSandboxServer(env);
    b = await startTestServer({ ...env, BERTH_LOG_LEVEL: 'warn' }, { adminKey: a.adminKey });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  it('creates, reads, pages, replaces with a version and deletes through the API, on either server', async () => {
    const policy = (name: string, output: number) => ({
      metadata: { name, labels: { team: 'core' } },
      spec: { type: 'maxToken', maxTokens: { output } },
    });
    for (const [i, s] of [a, a, b].entries()) {
      const r = await s.api('/policies', { method: 'POST', json: policy(`p${i}`, 100 + i) });
      assert.equal(r.status, 200, await r.text());
    }
    const got = await (await b.api('/policies/p0')).json();
    assert.equal(got.spec.maxTokens.output, 100);
    const firstPage = await b.api('/policies?limit=2');
    const names = (await firstPage.json()).map((p: any) => p.metadata.name);
    assert.deepEqual(names, ['p0', 'p1']);
    got.spec.maxTokens.output = 500;
    const put = await b.api('/policies/p0', { method: 'PUT', json: got });
    assert.equal(put.status, 200, await put.text());
    assert.equal((await (await a.api('/policies/p0')).json()).spec.maxTokens.output, 500);
    assert.equal((await a.api('/policies/p2', { method: 'DELETE' })).status, 200);
    assert.equal((await b.api('/policies/p2')).status, 404);
  });

  it("keeps one tenant's objects from another whichever server it asks", async () => {
    const acme = await newTenant(a, 'acme-pg');
    const r = await a.api('/policies', {
      method: 'POST',
      key: acme.key,
      json: { metadata: { name: 'mine' }, spec: { type: 'maxToken', maxTokens: { output: 1 } } },
    });
    assert.equal(r.status, 200, await r.text());
    const beta = await newTenant(b, 'beta-pg');
    assert.equal((await b.api('/policies/mine', { key: beta.key })).status, 404);
    assert.equal((await a.api('/policies/mine', { key: beta.key, method: 'DELETE' })).status, 404);
    assert.equal((await b.api('/policies/mine', { key: acme.key })).status, 200);
  });

  it('creates a sandbox and runs a command in it', async () => {
    const sb = await a.create('pg-one');
    assert.equal(sb.status, 'DEPLOYED');
    const r = await exec(a, sb.metadata.url, 'echo -n hello from postgres');
    assert.equal(r.stdout, 'hello from postgres');
    assert.equal((await b.api('/sandboxes/pg-one')).status, 200, 'the other server reads it');
  });

  it('refuses to start a server whose master key differs from the cluster’s', async () => {
    await assert.rejects(
      startTestServer(
        { BERTH_DATABASE_URL: url, BERTH_MASTER_KEY: randomBytes(32).toString('base64') },
        {
          adminKey: a.adminKey,
        },
      ),
      /master key is not the one the database's secrets are sealed with/,
    );
  });

  it('a server started again on the database finds every object', async () => {
    await b.close();
    b = await startTestServer(
      { BERTH_DATABASE_URL: url, BERTH_MASTER_KEY: MASTER_KEY, BERTH_LOG_LEVEL: 'warn' },
      { adminKey: a.adminKey },
    );
    assert.equal((await (await b.api('/policies/p0')).json()).spec.maxTokens.output, 500);
    assert.equal((await b.api('/policies/p1')).status, 200);
  });
});
