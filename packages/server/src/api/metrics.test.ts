// /metrics of a real server with two tenants, each of which called a model of its own workspace through the
// gateway: the process and HTTP series are everyone's, a series labelled with a workspace is read only by that
// workspace's members and the operator's metrics token.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { type FakeProvider, startFakeProvider } from '../test-support/fake-provider.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../test-support/server.js';
import { newTenant, type Tenant } from '../test-support/tenants.js';

const PROVIDER_KEY = 'sk-fake-provider-key-metrics';
const OPERATOR_TOKEN = 'operator-metrics-token-0123456789';

let s: TestServer;
let fake: FakeProvider;
let b: Tenant;

/** A scrape with `key` as its bearer credential (none when undefined). */
const scrape = (key?: string) =>
  fetch(`${s.url}/metrics`, { headers: key ? { authorization: `Bearer ${key}` } : {} });

async function modelCalledBy(key: string, ws: string) {
  const ok = async (r: Promise<Response>) => {
    const res = await r;
    assert.ok(res.ok, `${res.status} ${await res.clone().text()}`);
    return res.json();
  };
  await ok(
    s.api('/integrations/connections', {
      method: 'POST',
      key,
      json: {
        metadata: { name: 'oa' },
        spec: { integration: 'openai', config: { baseUrl: fake.url }, secret: { apiKey: PROVIDER_KEY } },
      },
    }),
  );
  await ok(
    s.api('/models', {
      method: 'POST',
      key,
      json: {
        metadata: { name: `gpt-${ws}` },
        spec: { integrationConnections: ['oa'], runtime: { type: 'openai', model: 'fake-gpt' } },
      },
    }),
  );
  for (let i = 0; i < 400 && (await ok(s.api(`/models/gpt-${ws}`, { key }))).status !== 'DEPLOYED'; i++)
    await sleep(25);
  const call = await fetch(`${s.url}/run/${ws}/models/gpt-${ws}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }] }),
  });
  assert.equal(call.status, 200, await call.text());
}

before(async () => {
  fake = await startFakeProvider({ key: PROVIDER_KEY });
  s = await startTestServer({ ...OUTBOUND_LOOPBACK, BERTH_METRICS_TOKEN: OPERATOR_TOKEN });
  b = await newTenant(s, 'team-b');
  await modelCalledBy(s.adminKey, 'default');
  await modelCalledBy(b.key, b.home);
  // Counted when each answer ends: wait until the operator sees both.
  for (let i = 0; i < 400; i++) {
    const text = await (await scrape(OPERATOR_TOKEN)).text();
    if (text.includes('model="gpt-default"') && text.includes('model="gpt-team-b"')) break;
    await sleep(25);
  }
});
after(async () => {
  await s.close();
  await fake.close();
});

test('/metrics counts requests per method, route and status and times them per route', async () => {
  for (let i = 0; i < 3; i++) assert.equal((await s.api('/policies')).status, 200);
  assert.equal((await s.api('/policies/missing')).status, 404);
  const text = await (await scrape()).text();
  assert.match(text, /berth_http_requests_total\{method="GET",route="\/v0\/policies",status="200"\} 3/);
  assert.match(
    text,
    /berth_http_requests_total\{method="GET",route="\/v0\/policies\/:policyName",status="404"\} 1/,
  );
  assert.match(text, /berth_http_request_duration_seconds_count\{method="GET",route="\/v0\/policies"\} 3/);
  assert.match(text, /process_resident_memory_bytes/);
});

describe('series that name a workspace', () => {
  test('without a credential, none: no workspace, model or key of any tenant', async () => {
    const res = await scrape();
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.doesNotMatch(text, /workspace="/);
    assert.doesNotMatch(text, /gpt-default|gpt-team-b|team-b/);
    assert.match(text, /# TYPE berth_model_tokens_total counter/, 'the families stay, empty');
  });

  test("each tenant's own key reads its workspace's series and never the other's", async () => {
    const mine = await (await scrape(b.key)).text();
    assert.match(mine, /berth_model_tokens_total\{workspace="team-b",model="gpt-team-b",key="ak-[0-9a-f]+"/);
    assert.doesNotMatch(mine, /workspace="default"|gpt-default/);
    const theirs = await (await scrape(s.adminKey)).text();
    assert.match(theirs, /berth_model_requests_total\{workspace="default",model="gpt-default"/);
    assert.doesNotMatch(theirs, /workspace="team-b"|gpt-team-b/);
    assert.match(theirs, /process_resident_memory_bytes/);
  });

  test("the operator's metrics token reads every workspace's series", async () => {
    const text = await (await scrape(OPERATOR_TOKEN)).text();
    assert.match(text, /workspace="default",model="gpt-default"/);
    assert.match(text, /workspace="team-b",model="gpt-team-b"/);
  });

  test('a credential that is not valid is refused with a 401, not answered with fewer series', async () => {
    for (const bad of ['not-a-key', `${OPERATOR_TOKEN}x`]) {
      const res = await scrape(bad);
      assert.equal(res.status, 401);
      assert.match(res.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.equal((await res.json()).error, 'UNAUTHENTICATED');
    }
  });
});
