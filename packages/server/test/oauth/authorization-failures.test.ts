// The failures of §7 that come back from the provider while the user authorizes, each made to happen in a real
// browser against a real OpenID provider and explained by the example tenant backend (examples/tenant-oauth): an
// invalid scope (the mail API not enabled for the OAuth application), a redirect URI differing from the registered
// one (the provider says so on its own page; the backend's table and docs/oauth.md explain it), and an authorization
// without offline access (no refresh token: explained, nothing created, and Berth refuses such a connection with the
// same words). Nothing here starts a sandbox.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { EXPLAIN, explain, settings, startBackend } from '../../../../examples/tenant-oauth/server.mjs';
import { REFRESH_FAILED } from '../../src/kinds/oauth2.js';
import { launchBrowser } from '../../src/test-support/browser.js';
import {
  NO_MAIL_CLIENT,
  startTestProvider,
  TENANT_CLIENT,
  type TestProvider,
} from '../../src/test-support/oidc-provider.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../../src/test-support/server.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { connectInBrowser, holdPort, type PortHold } from './support.js';

const WS = 'acme';

describe('§7 failures during authorization', () => {
  let idp: TestProvider;
  let s: TestServer;
  let acme: Tenant;
  let browser: Browser;
  const backends: { close(): Promise<unknown> }[] = [];
  const ports = {} as Record<'noMail' | 'online' | 'mismatch', PortHold>;
  const url = (p: number) => `http://127.0.0.1:${p}`;

  async function backend(hold: PortHold, over: Record<string, string> = {}) {
    const b = startBackend(
      settings({
        PORT: String(hold.port),
        BERTH_URL: s.url,
        BERTH_API_KEY: acme.key,
        BERTH_WORKSPACE: WS,
        OAUTH_AUTH_URL: idp.authUrl,
        OAUTH_TOKEN_URL: idp.tokenUrl,
        OAUTH_CLIENT_ID: TENANT_CLIENT.id,
        OAUTH_CLIENT_SECRET: TENANT_CLIENT.secret,
        OAUTH_SCOPES: 'mail.send openid profile email',
        MAIL_API_BASE: 'https://mail.test',
        ...over,
      }),
    );
    await hold.release();
    await b.listen();
    backends.push(b);
    return url(hold.port);
  }

  before(async () => {
    for (const k of ['noMail', 'online', 'mismatch'] as const) ports[k] = await holdPort();
    idp = await startTestProvider({
      // The mismatch backend's own callback is not registered: that is the mismatch.
      redirectUris: [ports.noMail.port, ports.online.port].map((p) => `${url(p)}/callback`),
      accessTokenTtlS: 60,
    });
    s = await startTestServer({ ...OUTBOUND_LOOPBACK });
    acme = await newTenant(s, WS);
    browser = (await launchBrowser()).browser;
  });
  after(async () => {
    await browser?.close();
    for (const b of backends) await b.close();
    for (const h of Object.values(ports)) await h.release();
    await s?.close();
    await idp?.close();
  });

  it('invalid scope: the mail API is not enabled for the application', async () => {
    const noMail = await backend(ports.noMail, {
      OAUTH_CLIENT_ID: NO_MAIL_CLIENT.id,
      OAUTH_CLIENT_SECRET: NO_MAIL_CLIENT.secret,
    });
    const landed = await connectInBrowser(browser, noMail, 'dave');
    assert.ok(landed.url.startsWith(noMail), landed.url);
    assert.ok(landed.text.includes(EXPLAIN.invalid_scope), landed.text);
    assert.equal((await s.api('/integrations/connections/mail-dave', { key: acme.key })).status, 404);
  });

  it('redirect URI mismatch: the provider refuses on its own page', async () => {
    const mismatch = await backend(ports.mismatch);
    const landed = await connectInBrowser(browser, mismatch, 'dave');
    assert.ok(landed.url.startsWith(idp.issuer), landed.url);
    assert.match(landed.text, /redirect_uri did not match any of the client's registered redirect_uris/);
    // The names providers give it (oidc-provider's, Google's) map to the one explanation.
    assert.equal(explain('invalid_redirect_uri'), EXPLAIN.redirect_uri_mismatch);
    assert.equal(explain('redirect_uri_mismatch'), EXPLAIN.redirect_uri_mismatch);
  });

  it('no offline access: no refresh token, explained, nothing created; Berth refuses such a connection', async () => {
    const online = await backend(ports.online, { OAUTH_ACCESS_TYPE: '' });
    const landed = await connectInBrowser(browser, online, 'erin');
    assert.ok(landed.text.includes(EXPLAIN.no_refresh_token), landed.text);
    assert.equal((await s.api('/functions/mail-erin', { key: acme.key })).status, 404);
    const res = await s.api('/integrations/connections', {
      key: acme.key,
      method: 'POST',
      json: {
        metadata: { name: 'mail-erin' },
        spec: {
          integration: 'oauth2',
          config: { tokenUrl: idp.tokenUrl },
          secret: { CLIENT_ID: TENANT_CLIENT.id, CLIENT_SECRET: TENANT_CLIENT.secret },
        },
      },
    });
    const problem = await res.json();
    assert.equal(res.status, 422);
    assert.ok(problem.detail.includes(REFRESH_FAILED), problem.detail);
    assert.match(problem.detail, /access_type=offline/);
  });
});
