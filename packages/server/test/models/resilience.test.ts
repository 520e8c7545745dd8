// Fallbacks across connections, transport failures (502), slow providers (504), cancellation by the
// caller, and the model lifecycle when its connection goes away or it is disabled.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { type FakeProvider, startFakeProvider } from '../../src/test-support/fake-provider.js';
import { connection, model, ok, PROVIDER_KEY, runUrl, startWorld, waitStatus, type World } from './setup.js';

let w: World;
let second: FakeProvider;

before(async () => {
  // A short provider timeout so a hanging provider is reported quickly.
  w = await startWorld({ BERTH_MODEL_TIMEOUT_MS: '1000' });
  second = await startFakeProvider({ key: PROVIDER_KEY });
  await connection(w.server, 'primary', 'openai', w.fake.url);
  await connection(w.server, 'backup', 'openai', second.url);
  await connection(w.server, 'dead', 'openai', 'http://127.0.0.1:1');
  await model(w.server, 'fb', {
    integrationConnections: ['primary', 'backup'],
    runtime: { type: 'openai', model: 'fake-gpt' },
  });
  await model(w.server, 'via-dead', {
    integrationConnections: ['dead', 'backup'],
    runtime: { type: 'openai' },
  });
  await model(w.server, 'only-dead', { integrationConnections: ['dead'], runtime: { type: 'openai' } });
});
after(async () => {
  await w.close();
  await second.close();
});

const chat = (name: string, body: Record<string, unknown> = {}, signal?: AbortSignal) =>
  fetch(`${runUrl(w.server, name)}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, ...body }),
    signal,
  });

test('a 429 from the first connection falls back to the second before the caller sees anything', async () => {
  const [a, b] = [w.fake.requests.length, second.requests.length];
  w.fake.fail(429);
  const r = await chat('fb');
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('x-berth-connection'), 'backup');
  assert.equal((await r.json()).choices[0].message.content, 'Hello from');
  assert.equal(w.fake.requests.length - a, 1);
  assert.equal(second.requests.length - b, 1);
});

test('a 5xx falls back too; a 400 does not (the request itself is wrong)', async () => {
  w.fake.fail(503);
  assert.equal((await chat('fb')).headers.get('x-berth-connection'), 'backup');
  const b = second.requests.length;
  w.fake.fail(400);
  const r = await chat('fb');
  assert.equal(r.status, 400);
  assert.equal(second.requests.length, b);
});

test('when every connection fails, the last failure is reported', async () => {
  w.fake.fail(429);
  second.fail(429);
  const r = await chat('fb');
  assert.equal(r.status, 429);
});

test('an unreachable provider is a 502, and falls back when there is another', async () => {
  const r = await chat('only-dead');
  assert.equal(r.status, 502);
  const p = await r.json();
  assert.equal(p.error.type, 'BAD_GATEWAY');
  assert.match(p.detail, /cannot reach the provider of integration connection dead/);
  const r2 = await chat('via-dead');
  assert.equal(r2.status, 200);
  assert.equal(r2.headers.get('x-berth-connection'), 'backup');
});

test('an unreachable provider is said on the model as an event, once a minute at most (decision 050)', async () => {
  const said = async (name: string) => {
    for (let i = 0; i < 100; i++) {
      const m = await ok(w.server.api(`/models/${name}`));
      const found = m.events.filter((e: { message: string }) => e.message.startsWith('provider unreachable'));
      if (found.length) return found.map((e: { message: string }) => e.message);
      await new Promise((r) => setTimeout(r, 20));
    }
    return [];
  };
  for (let i = 0; i < 3; i++) assert.equal((await chat('only-dead')).status, 502);
  const only = await said('only-dead');
  assert.equal(only.length, 1, 'three failed calls, one event');
  assert.match(
    only[0],
    /^provider unreachable: cannot reach the provider of integration connection dead \(ECONNREFUSED\); the call was answered 502 /,
  );
  assert.equal((await chat('via-dead')).status, 200);
  const [fellBack] = await said('via-dead');
  assert.match(fellBack, /connection dead .*; the call went on to the next connection/);
});

test('a provider that does not answer in time is a 504', async () => {
  w.fake.fail('hang');
  const r = await chat('fb');
  assert.equal(r.status, 504);
  assert.equal((await r.json()).error.type, 'TIMEOUT');
});

test('a caller that hangs up mid-stream cancels the provider call', async () => {
  w.fake.chunkDelayMs = 50;
  try {
    const cancelled = w.fake.nextCancel();
    const ac = new AbortController();
    const r = await chat('fb', { stream: true, max_tokens: 200 }, ac.signal);
    const reader = r.body!.getReader();
    await reader.read();
    ac.abort();
    await cancelled;
  } finally {
    w.fake.chunkDelayMs = 0;
  }
});

test('a deleted connection turns its model FAILED without waiting for a re-check; calls get a clear 503', async () => {
  await connection(w.server, 'temp', 'openai', w.fake.url);
  await model(w.server, 'fragile', { integrationConnections: ['temp'], runtime: { type: 'openai' } });
  await ok(w.server.api('/integrations/connections/temp', { method: 'DELETE' }));
  // The call races the model's wake-up: before it the endpoint has no usable connection, after it the model is
  // FAILED. Either answer is a clear 503 naming the cause.
  const r = await chat('fragile');
  assert.equal(r.status, 503);
  assert.match(
    (await r.json()).detail,
    /no usable integration connection|is FAILED: integration connection "temp" does not exist/,
  );
  // waitStatus gives up after 10 s, well before the 30 s backstop re-check: only the wake-up can pass.
  const failed = await waitStatus(w.server, 'fragile', 'FAILED');
  assert.match(failed.events.at(-1).message, /integration connection "temp" does not exist/);
});

test('a model of a non-provider connection fails; a disabled model is deactivated and refuses calls', async () => {
  await connection(w.server, 'hook', 'http-api', 'http://127.0.0.1:9');
  await model(
    w.server,
    'not-llm',
    { integrationConnections: ['hook'], runtime: { type: 'openai' } },
    'FAILED',
  );
  await model(
    w.server,
    'off',
    { enabled: false, integrationConnections: ['primary'], runtime: { type: 'openai' } },
    'DEACTIVATED',
  );
  const r = await chat('off');
  assert.equal(r.status, 503);
  assert.match((await r.json()).detail, /DEACTIVATED/);
});

test('the OpenAI client sees a fallback as a plain success', async () => {
  const client = new OpenAI({
    apiKey: w.server.adminKey,
    baseURL: `${runUrl(w.server, 'fb')}/v1`,
    maxRetries: 0,
  });
  w.fake.fail('reset');
  const r = await client.chat.completions.create({
    model: 'fb',
    messages: [{ role: 'user', content: 'x' }],
    max_tokens: 1,
  });
  assert.equal(r.choices[0].message.content, 'Hello');
});

test('a body nested thousands deep is a 400 problem before anything walks it, never a 500', async () => {
  const before = w.fake.requests.length;
  const deep = `${'['.repeat(20_000)}1${']'.repeat(20_000)}`;
  const r = await fetch(`${runUrl(w.server, 'fb')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: `{"messages":[{"role":"user","content":"Hi"}],"tools":${deep}}`,
  });
  assert.equal(r.status, 400);
  assert.match((await r.json()).detail, /nests deeper than/);
  assert.equal(w.fake.requests.length, before, 'the provider was not asked');
});
