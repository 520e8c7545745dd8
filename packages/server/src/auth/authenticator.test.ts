// The authenticator's cached answers (`resolveCached`, what the API's hook asks first): the same access `resolve`
// gives, never for longer than AUTH_CACHE_TTL_MS, never after an identity write, never for a scoped or expired
// credential, and never across credentials or workspaces.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { SqliteStore } from '../store/sqlite.js';
import type { Role } from '../kinds/types.js';
import { AUTH_CACHE_TTL_MS, createAuthenticator } from './authenticator.js';
import { sha256 } from './credentials.js';
import { type ApiKeyHashRecord, keys } from './records.js';
import { loadSigningKey } from './signing-key.js';

describe('cached credentials', () => {
  let dir: string;
  let store: SqliteStore;
  let clock: number;
  let authn: ReturnType<typeof createAuthenticator>;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-authn-'));
    store = new SqliteStore(join(dir, 'berth.db'));
    clock = Date.now();
    authn = createAuthenticator({
      store,
      signingKey: await loadSigningKey(dir),
      issuer: () => 'http://x',
      now: () => clock,
    });
  });
  afterEach(async () => {
    authn.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A key of `sub` in `workspace` with `role` there; returns the Authorization header. */
  async function key(sub: string, workspace: string, role: Role, extra: Partial<ApiKeyHashRecord> = {}) {
    const secret = `bk_${sub}-secret`;
    const rec: ApiKeyHashRecord = { id: `${sub}-key`, sub, subType: 'service_account', workspace, ...extra };
    await store.write([
      { op: 'create', key: keys.apiKeyHash(sha256(secret)), body: { ...rec } },
      ...(role && !extra.scope
        ? [
            {
              op: 'create' as const,
              key: keys.member(workspace, sub),
              body: { subject: sub, subType: 'service_account', role },
            },
          ]
        : []),
    ]);
    return { authorization: `Bearer ${secret}`, hash: sha256(secret) };
  }
  const route = { method: 'GET', path: '/v0/policies' };

  it('answers what resolve answered, from memory, until a write to an identity record', async () => {
    const a = await key('sa-a', 'ws-a', 'member');
    const h = { authorization: a.authorization };
    assert.equal(authn.resolveCached(h), undefined, 'nothing is cached before the first resolve');
    const resolved = await authn.resolve(h, route);
    assert.deepEqual(authn.resolveCached(h), resolved);
    assert.deepEqual(resolved, {
      principal: { subject: 'sa-a', subType: 'service_account', homeWorkspace: 'ws-a', via: 'api_key' },
      workspace: 'ws-a',
      role: 'member',
    });
    await store.write([{ op: 'delete', key: keys.apiKeyHash(a.hash) }]);
    assert.equal(authn.resolveCached(h), undefined, 'a deleted key is not answered from the cache');
    await assert.rejects(authn.resolve(h, route), { status: 401 });
  });

  it('drops a role taken away, and answers nothing past AUTH_CACHE_TTL_MS', async () => {
    const a = await key('sa-a', 'ws-a', 'admin');
    const h = { authorization: a.authorization };
    await authn.resolve(h, route);
    clock += AUTH_CACHE_TTL_MS - 1;
    assert.equal(authn.resolveCached(h)?.role, 'admin');
    clock += 1;
    assert.equal(authn.resolveCached(h), undefined, 'stale at AUTH_CACHE_TTL_MS');
    await authn.resolve(h, route);
    await store.write([{ op: 'delete', key: keys.member('ws-a', 'sa-a') }]);
    assert.equal(authn.resolveCached(h), undefined);
    await assert.rejects(authn.resolve(h, route), { status: 404 });
  });

  it("never answers one tenant's key with another's cached entry, nor for a workspace it is not a member of", async () => {
    const a = await key('sa-a', 'ws-a', 'admin');
    const b = await key('sa-b', 'ws-b', 'admin');
    await authn.resolve({ authorization: b.authorization }, route);
    await authn.resolve({ authorization: a.authorization }, route);
    // Tenant A addresses tenant B's workspace, whose role for B is cached: not A's.
    const across = { authorization: a.authorization, 'x-blaxel-workspace': 'ws-b' };
    assert.equal(authn.resolveCached(across), undefined);
    await assert.rejects(authn.resolve(across, route), { status: 404 });
    assert.equal(authn.resolveCached(across), undefined, 'a refusal is never cached as an answer');
    assert.equal(authn.resolveCached({ authorization: a.authorization })?.workspace, 'ws-a');
    assert.equal(authn.resolveCached({ authorization: b.authorization })?.principal.subject, 'sa-b');
    assert.equal(authn.resolveCached({ authorization: 'Bearer bk_sa-a-secreT' }), undefined);
  });

  it('never answers a scoped credential or an expired key from the cache', async () => {
    const scoped = await key('task', 'ws-a', 'viewer', { scope: { job: 'etl', execution: 'e1' } });
    const own = { method: 'GET', path: '/v0/jobs/etl/executions/e1' };
    assert.equal((await authn.resolve({ authorization: scoped.authorization }, own)).role, 'viewer');
    assert.equal(authn.resolveCached({ authorization: scoped.authorization }), undefined);
    await assert.rejects(authn.resolve({ authorization: scoped.authorization }, route), { status: 403 });

    const expiring = await key('sa-e', 'ws-a', 'member', { expiresAt: clock + 1000 });
    await authn.resolve({ authorization: expiring.authorization }, route);
    assert.equal(authn.resolveCached({ authorization: expiring.authorization })?.role, 'member');
    clock += 1000;
    assert.equal(authn.resolveCached({ authorization: expiring.authorization }), undefined);
    await assert.rejects(authn.resolve({ authorization: expiring.authorization }, route), { status: 401 });
  });
});
