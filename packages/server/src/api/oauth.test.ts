import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { importJWK, type JWK, SignJWT } from 'jose';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('OAuth2 token endpoint and JWTs', () => {
  let s: TestServer;
  let sa: { client_id: string; client_secret: string };
  before(async () => {
    s = await startTestServer();
    sa = await (await s.api('/service_accounts', { method: 'POST', json: { name: 'oauth-client' } })).json();
  });
  after(() => s.close());

  const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

  /** A token signed with the server's own key file, with claims chosen by the test. */
  async function forge(claims: { iss?: string; exp: number; sub?: string }) {
    const jwk = JSON.parse(readFileSync(join(s.dataDir, 'jwt-signing.jwk'), 'utf8')) as JWK;
    const key = await importJWK(jwk, 'ES256');
    return new SignJWT({ workspace: 'default' })
      .setProtectedHeader({ alg: 'ES256', kid: jwk.kid })
      .setIssuer(claims.iss ?? s.url)
      .setSubject(claims.sub ?? sa.client_id)
      .setAudience('berth')
      .setIssuedAt(claims.exp - 3600)
      .setExpirationTime(claims.exp)
      .sign(key);
  }

  it('issues a token for Basic credentials and a JSON body, accepted on /v0', async () => {
    const r = await fetch(`${s.url}/v0/oauth/token`, {
      method: 'POST',
      headers: { authorization: basic(sa.client_id, sa.client_secret), 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials' }),
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    const t = await r.json();
    assert.equal(t.token_type, 'Bearer');
    assert.equal(t.expires_in, 3600);
    assert.equal(t.access_token.split('.').length, 3);
    const claims = JSON.parse(Buffer.from(t.access_token.split('.')[1], 'base64url').toString());
    assert.equal(claims.iss, s.url);
    assert.equal(claims.sub, sa.client_id);
    assert.equal(claims.aud, 'berth');
    assert.equal(claims.workspace, 'default');
    assert.equal((await s.api('/policies', { key: t.access_token })).status, 200);
    assert.ok(!s.logs().includes(t.access_token));
  });

  it('issues a token for a form body with client_id and client_secret at /oauth/token', async () => {
    const r = await fetch(`${s.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: sa.client_id,
        client_secret: sa.client_secret,
      }).toString(),
    });
    assert.equal(r.status, 200);
    const t = await r.json();
    const ok = await fetch(`${s.url}/v0/policies`, {
      headers: { 'x-blaxel-authorization': `Bearer ${t.access_token}` },
    });
    assert.equal(ok.status, 200);
  });

  it('rejects a wrong secret with 401 invalid_client', async () => {
    const attempts: { headers: Record<string, string>; body: string }[] = [
      {
        headers: { authorization: basic(sa.client_id, 'wrong'), 'content-type': 'application/json' },
        body: '{"grant_type":"client_credentials"}',
      },
      {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `grant_type=client_credentials&client_id=${sa.client_id}&client_secret=wrong`,
      },
      { headers: { 'content-type': 'application/json' }, body: '{"grant_type":"client_credentials"}' },
    ];
    for (const init of attempts) {
      const r = await fetch(`${s.url}/v0/oauth/token`, { method: 'POST', ...init });
      assert.equal(r.status, 401);
      assert.match(r.headers.get('www-authenticate') ?? '', /^Basic/);
      const e = await r.json();
      assert.equal(e.error, 'invalid_client');
      assert.equal(typeof e.error_description, 'string');
    }
  });

  it('answers RFC 6749 errors for a bad grant type and a malformed body', async () => {
    const g = await fetch(`${s.url}/v0/oauth/token`, {
      method: 'POST',
      headers: { authorization: basic(sa.client_id, sa.client_secret), 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'password' }),
    });
    assert.equal(g.status, 400);
    assert.equal((await g.json()).error, 'unsupported_grant_type');
    const m = await fetch(`${s.url}/v0/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{not json',
    });
    assert.equal(m.status, 400);
    assert.equal((await m.json()).error, 'invalid_request');
    const none = await fetch(`${s.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(none.status, 400);
    assert.equal((await none.json()).error, 'invalid_request');
  });

  it('rejects a token whose signature was changed', async () => {
    const r = await fetch(`${s.url}/oauth/token`, {
      method: 'POST',
      headers: { authorization: basic(sa.client_id, sa.client_secret), 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials' }),
    });
    const { access_token } = await r.json();
    const [h, p, sig] = access_token.split('.');
    const i = Math.floor(sig.length / 2);
    const flipped = sig.slice(0, i) + (sig[i] === 'A' ? 'B' : 'A') + sig.slice(i + 1);
    const bad = await s.api('/policies', { key: `${h}.${p}.${flipped}` });
    assert.equal(bad.status, 401);
    assert.equal((await bad.json()).error, 'UNAUTHENTICATED');
  });

  it('rejects an expired token and a token from another issuer, both signed with the server key', async () => {
    const now = Math.floor(Date.now() / 1000);
    const expired = await forge({ exp: now - 60 });
    assert.equal((await s.api('/policies', { key: expired })).status, 401);
    const foreign = await forge({ exp: now + 600, iss: 'https://elsewhere.example' });
    assert.equal((await s.api('/policies', { key: foreign })).status, 401);
    const valid = await forge({ exp: now + 600 });
    assert.equal((await s.api('/policies', { key: valid })).status, 200);
  });

  it('rejects the token of a deleted service account', async () => {
    const other = await (
      await s.api('/service_accounts', { method: 'POST', json: { name: 'short-lived' } })
    ).json();
    const r = await fetch(`${s.url}/v0/oauth/token`, {
      method: 'POST',
      headers: {
        authorization: basic(other.client_id, other.client_secret),
        'content-type': 'application/json',
      },
      body: JSON.stringify({ grant_type: 'client_credentials' }),
    });
    const { access_token } = await r.json();
    assert.equal((await s.api('/policies', { key: access_token })).status, 200);
    assert.equal((await s.api(`/service_accounts/${other.client_id}`, { method: 'DELETE' })).status, 200);
    assert.equal((await s.api('/policies', { key: access_token })).status, 401);
  });

  it('publishes only the public key at /.well-known/jwks.json', async () => {
    const r = await fetch(`${s.url}/.well-known/jwks.json`);
    assert.equal(r.status, 200);
    const { keys } = await r.json();
    assert.equal(keys.length, 1);
    assert.equal(keys[0].kty, 'EC');
    assert.equal(keys[0].alg, 'ES256');
    assert.ok(keys[0].kid && keys[0].x && keys[0].y);
    assert.ok(!('d' in keys[0]));
  });
});
