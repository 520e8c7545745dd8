// maxToken policies enforced by the gateway: reservations are atomic under concurrency, refusals are clear
// 429s with Retry-After before the provider is asked, and /v0/policies/{name}/usages shows the window.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { budget, connection, eventually, model, ok, runUrl, startWorld, type World } from './setup.js';

let w: World;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await budget(w.server, 'out-1000', { output: 1000, granularity: 'hour' });
  await model(w.server, 'limited', {
    integrationConnections: ['oa'],
    policies: ['out-1000'],
    runtime: { type: 'openai', model: 'fake-gpt' },
  });
});
after(() => w.close());

const chat = (body: Record<string, unknown>) =>
  fetch(`${runUrl(w.server, 'limited')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], ...body }),
  });

test('100 concurrent calls against 1000 output tokens an hour: granted tokens never exceed the limit', async () => {
  const before = w.fake.requests.length;
  const answers = await Promise.all(Array.from({ length: 100 }, () => chat({ max_tokens: 50 })));
  const bodies = await Promise.all(answers.map((r) => r.json()));
  const granted = answers.map((r, i) => ({ r, b: bodies[i] })).filter(({ r }) => r.status === 200);
  const refused = answers.map((r, i) => ({ r, b: bodies[i] })).filter(({ r }) => r.status === 429);
  const used = granted.reduce((n, { b }) => n + b.usage.completion_tokens, 0);
  assert.ok(used <= 1000, `granted ${used} output tokens`);
  assert.equal(granted.length, 20, 'every reservation of 50 that fits is granted');
  assert.equal(refused.length, 80);
  assert.equal(w.fake.requests.length - before, 20, 'refused calls never reach the provider');
  for (const { r, b } of refused) {
    assert.equal(b.error.type, 'RATE_LIMITED');
    assert.match(b.detail, /policy out-1000 allows 1000 output tokens per hour/);
    const retry = Number(r.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 3600, `Retry-After ${retry}`);
  }
  const windows = await eventually(
    () => ok(w.server.api('/policies/out-1000/usages')),
    (ws: any[]) => ws[0]?.reserved.output === 0,
    'every reservation settled',
  );
  assert.equal(windows.length, 1);
  assert.equal(windows[0].used.output, 1000);
  assert.equal(windows[0].remaining.output, 0);
  assert.equal(windows[0].granularity, 'hour');
  assert.equal(Date.parse(windows[0].end) - Date.parse(windows[0].start), 3_600_000);
});

test('a call larger than the whole limit is refused as a policy denial, not a retry', async () => {
  const r = await chat({ max_tokens: 5000 });
  assert.equal(r.status, 422);
  const p = await r.json();
  assert.equal(p.error.type, 'POLICY_DENIED');
  assert.match(p.detail, /allows 1000 per hour/);
});

test('usages of a policy that limits nothing is an empty list; an unknown policy a 404', async () => {
  await ok(
    w.server.api('/policies', {
      method: 'POST',
      json: { metadata: { name: 'where' }, spec: { type: 'location', locations: [{ name: 'local' }] } },
    }),
  );
  assert.deepEqual(await ok(w.server.api('/policies/where/usages')), []);
  assert.equal((await w.server.api('/policies/nope/usages')).status, 404);
});

test('a location policy that excludes this server’s region fails the model with POLICY_DENIED; fixing it deploys', async () => {
  await ok(
    w.server.api('/policies', {
      method: 'POST',
      json: {
        metadata: { name: 'eu-only' },
        spec: { type: 'location', locations: [{ name: 'eu-west', type: 'region' }] },
      },
    }),
  );
  const m = await model(
    w.server,
    'fenced',
    { integrationConnections: ['oa'], policies: ['eu-only'], runtime: { type: 'openai' } },
    'FAILED',
  );
  assert.match(m.events.at(-1).message, /^POLICY_DENIED: location policy "eu-only"/);
  const call = await fetch(`${runUrl(w.server, 'fenced')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(call.status, 503, 'a FAILED model serves nothing');
  await ok(
    w.server.api('/policies/eu-only', {
      method: 'PUT',
      json: { metadata: { name: 'eu-only' }, spec: { type: 'location', locations: [{ name: 'local' }] } },
    }),
  );
  // The policy is another object: the model is re-judged on its own schedule.
  await eventually(
    () => ok(w.server.api('/models/fenced')),
    (o: any) => o.status === 'DEPLOYED',
    'model deployed again',
  );
});

test('a streamed call cut short by its caller still settles its reservation', async () => {
  await budget(w.server, 'roomy', { total: 100000, granularity: 'day' });
  await model(w.server, 'cut', {
    integrationConnections: ['oa'],
    policies: ['roomy'],
    runtime: { type: 'openai' },
  });
  w.fake.chunkDelayMs = 30;
  try {
    const cancelled = w.fake.nextCancel();
    const ac = new AbortController();
    const r = await fetch(`${runUrl(w.server, 'cut')}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 500, stream: true }),
      signal: ac.signal,
    });
    // The first chunk only opens the message (`role`, empty content): read past it to some text.
    const reader = r.body!.getReader();
    for (let i = 0; i < 3; i++) await reader.read();
    ac.abort();
    await cancelled;
  } finally {
    w.fake.chunkDelayMs = 0;
  }
  const [win] = await eventually(
    () => ok(w.server.api('/policies/roomy/usages')),
    (ws: any[]) => ws[0]?.reserved.total === 0,
    'the reservation settled',
  );
  assert.ok(
    win.used.output > 0 && win.used.output < 500,
    `charged ${win.used.output} output tokens for a partial answer`,
  );
  assert.ok(win.used.input > 0);
});
