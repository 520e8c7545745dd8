// Requests Berth sends for users (model providers, callbacks, git clones, image registries) never reach the host:
// two tenants, each with its own key, write destinations on loopback (in every spelling), on the host's own LAN
// address, behind a name that rebinds to loopback after the write check, or stored before any check existed —
// refused at write, or at connect, and the listener standing for "a service on the host" hears nothing. A member
// cannot move the admin's provider key to an address of its own by sending it back masked.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SecretBox } from '../src/crypto/secret-box.js';
import { SqliteStore } from '../src/store/sqlite.js';
import { type FakeProvider, startFakeProvider } from '../src/test-support/fake-provider.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../src/test-support/server.js';
import { newTenant, type Tenant } from '../src/test-support/tenants.js';
import { EVERY_WORKSPACE } from '../src/store/store.js';

const HOST = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
const PROVIDER_KEY = 'sk-admin-provider-key-0123456789abcdef';
const MASTER_KEY = randomBytes(32).toString('hex');

/** "A service on the host": listens on every address, records every request it hears. */
async function listener(): Promise<{ port: number; heard: IncomingHttpHeaders[]; server: Server }> {
  const heard: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    heard.push(req.headers);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"secret":"host-only"}');
  });
  await new Promise<void>((r) => server.listen(0, '::', r));
  return { port: (server.address() as AddressInfo).port, heard, server };
}

async function json(res: Response) {
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const chat = (s: TestServer, ws: string, model: string, key: string) =>
  fetch(`${s.url}/run/${ws}/models/${model}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });

async function deployed(s: TestServer, ws: string, key: string, name: string) {
  for (let i = 0; i < 400; i++) {
    const m = await json(await s.api(`/models/${name}`, { key, headers: { 'x-service-workspace': ws } }));
    if (m.body?.status === 'DEPLOYED') return;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`model ${name} never deployed`);
}

describe('outbound requests on a server that opens nothing', () => {
  let s: TestServer;
  let host: Awaited<ReturnType<typeof listener>>;
  let tenants: Tenant[];
  /** rebind.test: a public answer for the write check, loopback for every later lookup. */
  const answered = new Map<string, number>();
  const lookup = async (name: string) => {
    const n = (answered.get(name) ?? 0) + 1;
    answered.set(name, n);
    if (name.startsWith('rebind')) return n === 1 ? ['93.184.215.14'] : ['127.0.0.1'];
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
  };

  before(async () => {
    assert.ok(HOST, 'this host has a non-loopback IPv4 address');
    host = await listener();
    s = await startTestServer({}, { outboundLookup: lookup });
    tenants = [await newTenant(s, 'acme'), await newTenant(s, 'beta')];
  });
  after(async () => {
    await s.close();
    host.server.close();
  });

  const as = (t: Tenant, path: string, init: { method?: string; json?: unknown } = {}) =>
    s.api(path, { ...init, key: t.key, headers: { 'x-service-workspace': t.home } });

  it('a model connection whose baseUrl names the host (any spelling) is refused at write, never dialled', async () => {
    const p = host.port;
    const rows: [string, RegExp][] = [
      [`http://127.0.0.1:${p}`, /loopback \(BERTH_OUTBOUND_ALLOW_CIDRS=127\.0\.0\.0\/8 opens it\)/],
      [`http://localhost:${p}/v1`, /loopback/],
      [`http://[::ffff:127.0.0.1]:${p}`, /loopback/],
      [`http://127.1:${p}`, /loopback/],
      [`http://2130706433:${p}`, /loopback/],
      [`http://0x7f.1:${p}`, /loopback/],
      [`http://[::1]:${p}`, /loopback/],
      [`http://0.0.0.0:${p}`, /never opened/],
      [`http://${HOST}:${p}`, /never opened/],
      [`http://[::ffff:${HOST}]:${p}`, /never opened/],
      [`http://169.254.169.254:${p}`, /link-local/],
      [`http://127.0.0.1:${p}/secret-path#`, /query or a fragment/],
      [`https://api.example.test/v1#`, /query or a fragment/],
      [`https://api.example.test/v1?x=`, /query or a fragment/],
      [`http://api.example.test@127.0.0.1:${p}/`, /credentials/],
    ];
    for (const t of tenants)
      for (const [baseUrl, why] of rows) {
        const r = await json(
          await as(t, '/integrations/connections', {
            method: 'POST',
            json: {
              metadata: { name: 'local' },
              spec: {
                integration: 'openai-compatible',
                config: { baseUrl },
                secret: { apiKey: PROVIDER_KEY },
              },
            },
          }),
        );
        assert.equal(r.status, 422, `${t.home} ${baseUrl}: ${JSON.stringify(r.body)}`);
        assert.deepEqual(
          r.body.errors.map((e: any) => e.pointer),
          ['/spec/config/baseUrl'],
          baseUrl,
        );
        assert.match(r.body.errors[0].message, why, baseUrl);
      }
    assert.equal(host.heard.length, 0);
    for (const t of tenants)
      assert.equal((await as(t, '/integrations/connections/local')).status, 404, 'nothing was stored');
  });

  it('a name that passes the write check and then resolves to loopback is refused at connect', async () => {
    for (const t of tenants) {
      const name = `rebind-${t.home}.example`;
      const c = await as(t, '/integrations/connections', {
        method: 'POST',
        json: {
          metadata: { name: 'rebinding' },
          spec: {
            integration: 'openai-compatible',
            config: { baseUrl: `http://${name}:${host.port}/v1` },
            secret: { apiKey: PROVIDER_KEY },
          },
        },
      });
      assert.equal(c.status, 200, 'the write check saw a public address');
      const m = await as(t, '/models', {
        method: 'POST',
        json: {
          metadata: { name: 'gpt' },
          spec: { integrationConnections: ['rebinding'], runtime: { type: 'openai', model: 'gpt-4o-mini' } },
        },
      });
      assert.equal(m.status, 200);
      await deployed(s, t.home, t.key, 'gpt');
      const r = await json(await chat(s, t.home, 'gpt', t.key));
      assert.equal(r.status, 502, JSON.stringify(r.body));
      assert.match(r.body.detail, new RegExp(`${name} resolves to 127\\.0\\.0\\.1`));
      assert.doesNotMatch(JSON.stringify(r.body), /host-only/);
    }
    assert.equal(host.heard.length, 0);
  });

  it('a connection stored with a loopback baseUrl before any check is never dialled', async () => {
    for (const t of tenants) {
      assert.equal(
        (
          await as(t, '/integrations/connections', {
            method: 'POST',
            json: {
              metadata: { name: 'old' },
              spec: {
                integration: 'openai-compatible',
                config: { baseUrl: 'https://api.example.test/v1' },
                secret: { apiKey: PROVIDER_KEY },
              },
            },
          })
        ).status,
        200,
      );
      // As an older server stored it: the record rewritten under the API.
      const key = { kind: 'IntegrationConnection', workspace: t.home, parent: '', name: 'old' };
      const o = await s.store.get(key);
      assert.ok(o);
      const body = structuredClone(o.body);
      body.spec.config.baseUrl = `http://[::ffff:127.0.0.1]:${host.port}/v1`;
      await s.store.write([{ op: 'update', key, body }]);
      assert.equal(
        (
          await as(t, '/models', {
            method: 'POST',
            json: {
              metadata: { name: 'old-gpt' },
              spec: { integrationConnections: ['old'], runtime: { type: 'openai', model: 'gpt-4o-mini' } },
            },
          })
        ).status,
        200,
      );
      await deployed(s, t.home, t.key, 'old-gpt');
      const r = await json(await chat(s, t.home, 'old-gpt', t.key));
      assert.equal(r.status, 502, JSON.stringify(r.body));
      assert.match(r.body.detail, /loopback/);
    }
    assert.equal(host.heard.length, 0);
  });

  it('job and agent callbacks, and git repositories, on the host are refused at write', async () => {
    const p = host.port;
    const hosts = ['127.0.0.1', '[::ffff:127.0.0.1]', '2130706433', '0x7f.1', 'localhost', HOST, '[::1]'];
    for (const t of tenants)
      for (const h of hosts) {
        const cb = await json(
          await as(t, '/jobs/nightly', {
            method: 'PUT',
            json: {
              metadata: { name: 'nightly' },
              spec: { triggers: [{ type: 'http', configuration: { callbackUrl: `http://${h}:${p}/hook` } }] },
            },
          }),
        );
        assert.equal(cb.status, 422, `${t.home} ${h}: ${JSON.stringify(cb.body)}`);
        assert.deepEqual(
          cb.body.errors.map((e: any) => e.pointer),
          ['/spec/triggers/0/configuration/callbackUrl'],
        );
        assert.match(cb.body.errors[0].message, /BERTH_OUTBOUND_ALLOW_CIDRS|never opened/);
        const agent = await json(
          await as(t, '/agents/hooked', {
            method: 'PUT',
            json: {
              metadata: { name: 'hooked' },
              spec: {
                triggers: [{ type: 'http-async', configuration: { callbackUrl: `https://${h}:${p}/hook` } }],
              },
            },
          }),
        );
        assert.equal(agent.status, 422, `${t.home} agent ${h}`);
        const git = await json(
          await as(t, '/agents/cloned', {
            method: 'PUT',
            json: {
              metadata: { name: 'cloned' },
              spec: { repository: { type: 'git', url: `http://${h}:${p}/repo.git` } },
            },
          }),
        );
        assert.equal(git.status, 422, `${t.home} git ${h}: ${JSON.stringify(git.body)}`);
        assert.deepEqual(
          git.body.errors.map((e: any) => e.pointer),
          ['/spec/repository/url'],
        );
      }
    for (const t of tenants) {
      const plain = await json(
        await as(t, '/agents/cloned', {
          method: 'PUT',
          json: {
            metadata: { name: 'cloned' },
            spec: { repository: { type: 'git', url: 'git://example.com/x' } },
          },
        }),
      );
      assert.equal(plain.status, 422, 'git:// cannot be pinned to a vetted address');
    }
    assert.equal(host.heard.length, 0);
  });

  it('an image reference on the host is refused without the setting, and the registry hears nothing', async () => {
    for (const t of tenants)
      for (const ref of [
        `127.0.0.1:${host.port}/x:1`,
        `localhost:${host.port}/x:1`,
        `${HOST}:${host.port}/x:1`,
        `[::1]:${host.port}/x:1`,
      ]) {
        const r = await json(await as(t, '/images', { method: 'POST', json: { reference: ref } }));
        assert.equal(r.status, 422, `${t.home} ${ref}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.error, 'IMAGE_REFUSED');
        assert.deepEqual(
          r.body.errors.map((e: any) => e.pointer),
          ['/reference'],
        );
      }
    assert.equal(host.heard.length, 0);
  });
});

describe('a callback stored before the checks existed', () => {
  it('is never connected to when it names the host by an IP literal: refused, and dropped', async () => {
    assert.ok(HOST);
    const host = await listener();
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-outbound-'));
    const env = { BERTH_MASTER_KEY: MASTER_KEY };
    try {
      const first = await startTestServer(env, { dataDir });
      const tenants = [await newTenant(first, 'acme'), await newTenant(first, 'beta')];
      await first.close();
      // Written as an older server wrote them: one pending callback per tenant and address spelling.
      const store = new SqliteStore(join(dataDir, 'berth.db'));
      const box = new SecretBox(Buffer.from(MASTER_KEY, 'hex'));
      const targets = ['127.0.0.1', '[::ffff:127.0.0.1]', '2130706433', HOST];
      for (const t of tenants)
        for (const [i, h] of targets.entries())
          await store.write([
            {
              op: 'create',
              key: { kind: 'PendingCallback', workspace: t.home, parent: 'Job/nightly', name: `msg_${i}` },
              body: {
                url: `http://${h}:${host.port}/hook`,
                secret: box.seal('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'),
                body: '{"executionId":"x"}',
                retry: 3,
                attempts: 0,
                nextAt: 0,
              },
            },
          ]);
      await store.close();
      const second = await startTestServer(env, { dataDir });
      try {
        let left = -1;
        for (let i = 0; i < 200 && left !== 0; i++) {
          left = (await second.store.list({ workspace: EVERY_WORKSPACE, kind: 'PendingCallback' })).length;
          if (left) await new Promise((r) => setTimeout(r, 25));
        }
        assert.equal(left, 0, 'refused callbacks are final: not retried, not kept');
        assert.equal(host.heard.length, 0);
        assert.match(second.logs(), /"reason":"[^"]*loopback[^"]*","msg":"callback failed"/);
        assert.match(second.logs(), /"reason":"[^"]*never opened[^"]*","msg":"callback failed"/);
      } finally {
        await second.close();
      }
    } finally {
      host.server.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("a member and the admin's provider key", () => {
  let s: TestServer;
  let fake: FakeProvider;
  let mine: Awaited<ReturnType<typeof listener>>;
  let acme: Tenant;
  let beta: Tenant;
  const inAcme = (t: Tenant) => ({ key: t.key, headers: { 'x-service-workspace': 'acme' } });

  before(async () => {
    fake = await startFakeProvider({ key: PROVIDER_KEY });
    mine = await listener();
    // The provider and the member's listener both on loopback, opened: the address rules let both through, so
    // what keeps the key is the rule on masked secrets alone.
    s = await startTestServer({ ...OUTBOUND_LOOPBACK });
    acme = await newTenant(s, 'acme');
    beta = await newTenant(s, 'beta');
    const c = await s.api('/integrations/connections', {
      method: 'POST',
      ...inAcme(acme),
      json: {
        metadata: { name: 'provider' },
        spec: {
          integration: 'openai-compatible',
          config: { baseUrl: fake.url },
          secret: { apiKey: PROVIDER_KEY },
        },
      },
    });
    assert.equal(c.status, 200);
    const m = await s.api('/models', {
      method: 'POST',
      ...inAcme(acme),
      json: {
        metadata: { name: 'gpt' },
        spec: { integrationConnections: ['provider'], runtime: { type: 'openai', model: 'gpt-4o-mini' } },
      },
    });
    assert.equal(m.status, 200);
    // beta's account is a member of acme's workspace: invited by acme's admin, accepted by beta itself.
    const inv = await s.api(`/workspaces/acme/members/${beta.id}`, {
      method: 'PUT',
      key: acme.key,
      json: { role: 'member' },
    });
    assert.equal(inv.status, 202);
    const acc = await s.api(`/workspaces/acme/invitations/${beta.id}/accept`, {
      method: 'POST',
      key: beta.key,
    });
    assert.equal(acc.status, 200);
    await deployed(s, 'acme', beta.key, 'gpt');
  });
  after(async () => {
    await s.close();
    await fake.close();
    mine.server.close();
  });

  const read = async (t: Tenant) =>
    (await json(await s.api('/integrations/connections/provider', inAcme(t)))).body;
  const put = (t: Tenant, body: any) =>
    s.api('/integrations/connections/provider', { method: 'PUT', ...inAcme(t), json: body });

  it('a member sending the masked key back with a new baseUrl or integration is refused; the key stays put', async () => {
    const got = await read(beta);
    assert.equal(got.spec.secret.apiKey, '********');
    for (const change of [
      (b: any) => {
        b.spec.config.baseUrl = `http://127.0.0.1:${mine.port}/v1`;
      },
      (b: any) => {
        b.spec.config = { baseUrl: fake.url, apiVersion: 'x' };
        b.spec.integration = 'openai';
      },
      (b: any) => {
        delete b.spec.config;
      },
    ]) {
      const body = structuredClone(got);
      change(body);
      const r = await json(await put(beta, body));
      assert.equal(r.status, 403, JSON.stringify(r.body));
      assert.equal(r.body.error, 'FORBIDDEN');
      assert.match(r.body.detail, /send the secret again/);
    }
    const call = await chat(s, 'acme', 'gpt', beta.key);
    assert.equal(call.status, 200, await call.text());
    assert.equal(mine.heard.length, 0, "the member's listener heard nothing");
    assert.equal(fake.requests.at(-1)?.headers.authorization, `Bearer ${PROVIDER_KEY}`);
    assert.equal((await read(acme)).spec.config.baseUrl, fake.url, 'nothing was stored');
  });

  it('a member may change what does not move the key, and may send a key of its own anywhere', async () => {
    const body = await read(beta);
    body.spec.sandbox = true;
    assert.equal((await put(beta, body)).status, 200, 'same destination: the masked key is kept');
    body.spec.config.baseUrl = `http://127.0.0.1:${mine.port}/v1`;
    body.spec.secret.apiKey = 'sk-member-own-key-1234';
    delete body.metadata.resourceVersion;
    const r = await json(await put(beta, body));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await chat(s, 'acme', 'gpt', beta.key);
    assert.ok(mine.heard.length > 0);
    for (const h of mine.heard) assert.notEqual(h.authorization, `Bearer ${PROVIDER_KEY}`);
    assert.equal(mine.heard.at(-1)?.authorization, 'Bearer sk-member-own-key-1234');
  });

  it('an admin may move the stored key with it masked', async () => {
    const body = await read(acme);
    assert.equal(body.spec.secret.apiKey, '********');
    body.spec.secret.apiKey = PROVIDER_KEY;
    body.spec.config.baseUrl = fake.url;
    delete body.metadata.resourceVersion;
    assert.equal((await put(acme, body)).status, 200);
    const again = await read(acme);
    again.spec.config.baseUrl = `${fake.url}/`;
    assert.equal((await put(acme, again)).status, 200, 'the admin moves it masked');
    const call = await chat(s, 'acme', 'gpt', acme.key);
    assert.equal(call.status, 200, await call.text());
    assert.equal(fake.requests.at(-1)?.headers.authorization, `Bearer ${PROVIDER_KEY}`);
  });
});
