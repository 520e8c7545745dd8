// A job task's credential against the authenticator: it resolves only for the read routes of its own execution
// (as the API's hook asks), and never where no route is given (the gateways), nor as a bare principal.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { issueCredential } from '../controllers/job/job-credential.js';
import { SqliteStore } from '../store/sqlite.js';
import { createAuthenticator } from './authenticator.js';
import { scopeAllows } from './execution-scope.js';
import { loadSigningKey } from './signing-key.js';

const SCOPE = { job: 'etl', execution: 'e1' };

describe('a job execution credential', () => {
  let dir: string;
  let store: SqliteStore;
  let authn: ReturnType<typeof createAuthenticator>;
  let headers: Record<string, string>;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-scope-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    authn = createAuthenticator({ store, signingKey: await loadSigningKey(dir), issuer: () => 'http://x' });
    const { cred, op } = issueCredential('ws1', 'etl', 'e1', Date.now(), 60_000);
    await store.write([op]);
    headers = { authorization: `Bearer ${cred.key}` };
  });
  after(async () => {
    authn.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('allows reading its own execution, its tasks and their logs, and nothing else', () => {
    for (const path of [
      '/v0/jobs/etl/executions/e1',
      '/v0/jobs/etl/executions/e1/tasks',
      '/v0/jobs/etl/executions/e1/tasks/3/logs',
    ])
      assert.ok(scopeAllows(SCOPE, { method: 'GET', path }), path);
    for (const [method, path] of [
      ['DELETE', '/v0/jobs/etl/executions/e1'],
      ['POST', '/v0/jobs/etl/executions'],
      ['GET', '/v0/jobs/etl/executions'],
      ['GET', '/v0/jobs/etl/executions/e2'],
      ['GET', '/v0/jobs/other/executions/e1'],
      ['GET', '/v0/jobs/etl'],
      ['GET', '/v0/jobs/etl/executions/e1/tasks/x/logs'],
      ['GET', '/v0/jobs/etl/executions/e1/../e2'],
      ['GET', '/v0/jobs/etl/executions/%E0%A4%A'],
    ])
      assert.ok(!scopeAllows(SCOPE, { method, path }), `${method} ${path}`);
  });

  it('resolves as a viewer of its workspace on an allowed route only; refused without a route or elsewhere', async () => {
    const a = await authn.resolve(headers, { method: 'GET', path: '/v0/jobs/etl/executions/e1' });
    assert.equal(a.workspace, 'ws1');
    assert.equal(a.role, 'viewer');
    await assert.rejects(authn.resolve(headers), { status: 403 });
    await assert.rejects(authn.resolve(headers, { method: 'GET', path: '/v0/sandboxes' }), { status: 403 });
    await assert.rejects(
      authn.resolve(
        { ...headers, 'x-blaxel-workspace': 'ws2' },
        { method: 'GET', path: '/v0/jobs/etl/executions/e1' },
      ),
      { status: 404 },
    );
    await assert.rejects(authn.principal(headers), { status: 403 });
  });
});
