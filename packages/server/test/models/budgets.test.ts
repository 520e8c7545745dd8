// Token budgets cannot be bypassed: for each limit kind (input, output, total, and output with a ratio
// deriving input) and each way of sending the same JSON body (application/json, text/plain, form-encoded,
// no Content-Type, gzip), 20 concurrent calls are judged and metered alike, and the window never ends
// above its limit.
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { newTenant } from '../../src/test-support/tenants.js';
import { budget, connection, eventually, model, ok, runUrl, startWorld, type World } from './setup.js';

let w: World;

/** A prompt of 8 o200k tokens: 15 reserved (framing and priming), 14 counted by the provider. */
const PROMPT = 'Say hello to the budget, please.';
const MAX_TOKENS = 50;

const LIMITS = {
  input: { input: 150 },
  output: { output: 500 },
  total: { total: 650 },
  ratio: { output: 500, ratioInputOverOutput: 0.3 },
} as const;

const SENDS: Record<string, (json: string) => { headers: Record<string, string>; body: Buffer }> = {
  json: (j) => ({ headers: { 'content-type': 'application/json' }, body: Buffer.from(j) }),
  text: (j) => ({ headers: { 'content-type': 'text/plain' }, body: Buffer.from(j) }),
  form: (j) => ({ headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: Buffer.from(j) }),
  // A Uint8Array body makes fetch send no Content-Type at all.
  none: (j) => ({ headers: {}, body: Buffer.from(j) }),
  gzip: (j) => ({
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: gzipSync(Buffer.from(j)),
  }),
};

const nameOf = (kind: string, send: string) => `b-${kind}-${send}`;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await Promise.all(
    Object.entries(LIMITS).flatMap(([kind, maxTokens]) =>
      Object.keys(SENDS).map(async (send) => {
        const name = nameOf(kind, send);
        await budget(w.server, name, { ...maxTokens, granularity: 'day' });
        await model(w.server, name, {
          integrationConnections: ['oa'],
          policies: [name],
          runtime: { type: 'openai', model: 'gpt-4o-mini' },
        });
      }),
    ),
  );
});
after(() => w.close());

for (const kind of Object.keys(LIMITS) as (keyof typeof LIMITS)[])
  for (const send of Object.keys(SENDS))
    test(`${kind} limit, body sent as ${send}: 20 concurrent calls are judged and the window stays within it`, async () => {
      const name = nameOf(kind, send);
      const json = JSON.stringify({
        messages: [{ role: 'user', content: PROMPT }],
        max_tokens: MAX_TOKENS,
      });
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => {
          const { headers, body } = SENDS[send](json);
          return fetch(`${runUrl(w.server, name)}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${w.server.adminKey}`, ...headers },
            body: new Blob([new Uint8Array(body)]),
          });
        }),
      );
      const statuses = answers.map((r) => r.status);
      await Promise.all(answers.map((r) => r.arrayBuffer()));
      const granted = statuses.filter((s) => s === 200).length;
      assert.ok(granted > 0, `some calls fit: ${statuses}`);
      assert.ok(
        statuses.every((s) => s === 200 || s === 429),
        `${statuses}`,
      );
      assert.ok(granted < 20, `the limit refused some of the 20 calls: ${statuses}`);
      const [win] = await eventually(
        () => ok(w.server.api(`/policies/${name}/usages`)),
        (ws: any[]) => ws[0]?.reserved.input === 0 && ws[0]?.reserved.output === 0,
        'every reservation settled',
      );
      const limits = win.limits;
      const used = win.used;
      assert.ok(
        used.output === granted * MAX_TOKENS,
        `metered ${used.output} output tokens for ${granted} calls`,
      );
      if (limits.input !== undefined)
        assert.ok(used.input <= limits.input, `input ${used.input} > ${limits.input}`);
      if (limits.output !== undefined) assert.ok(used.output <= limits.output, `output ${used.output}`);
      if (limits.total !== undefined)
        assert.ok(
          used.input + used.output <= limits.total,
          `total ${used.input + used.output} > ${limits.total}`,
        );
    });

test('a body that is not JSON is reserved at a token per byte: it cannot slip past an input limit', async () => {
  const name = nameOf('input', 'form');
  const r = await fetch(`${runUrl(w.server, name)}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${w.server.adminKey}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: `prompt=${'x'.repeat(400)}`,
  });
  assert.equal(r.status, 422);
  assert.match((await r.json()).detail, /may use 407 input tokens/);
});

test('a non-JSON upload to a non-inference path is judged but not refused for its size', async () => {
  await budget(w.server, 'uploads', { input: 100 });
  await model(w.server, 'uploads', {
    integrationConnections: ['oa'],
    policies: ['uploads'],
    runtime: { type: 'openai', model: 'gpt-4o-mini' },
  });
  const r = await fetch(`${runUrl(w.server, 'uploads')}/v1/audio/transcriptions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${w.server.adminKey}`,
      'content-type': 'multipart/form-data; boundary=x',
    },
    body: `--x\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n${'A'.repeat(5000)}\r\n--x--\r\n`,
  });
  assert.equal(r.status, 404, 'it reached the provider (which has no such route), not a 422 for 5000 bytes');
  await eventually(
    () => ok(w.server.api('/policies/uploads/usages')),
    (ws: any[]) => ws[0]?.reserved.input === 0,
    'the one-token reservation released',
  );
});

test('a prompt holding a special token’s text runs under a budget, counted as ordinary text (it got a 500)', async () => {
  await budget(w.server, 'special', { total: 10_000 });
  await model(w.server, 'special', {
    integrationConnections: ['oa'],
    policies: ['special'],
    runtime: { type: 'openai', model: 'gpt-4o-mini' },
  });
  const r = await fetch(`${runUrl(w.server, 'special')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      messages: [{ role: 'user', content: 'What does <|endoftext|> mean to a tokenizer?' }],
      max_tokens: MAX_TOKENS,
    }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  await r.arrayBuffer();
  const [win] = await eventually(
    () => ok(w.server.api('/policies/special/usages')),
    (ws: any[]) => ws[0]?.reserved.input === 0 && ws[0]?.used.output > 0,
    'the call settled',
  );
  assert.ok(win.used.input > 0, `input metered: ${JSON.stringify(win.used)}`);
});

test('a budget lowered between two calls applies to the very next call, in its workspace only', async () => {
  // A second tenant holds a policy and a model of the same names, with a limit no call fits: what either
  // workspace cached (endpoint, policy, window) must never answer for the other.
  const other = await newTenant(w.server, 'lowered-other');
  await connection(w.server, 'oa', 'openai', w.fake.url, undefined, other.key);
  await budget(w.server, 'lowered', { output: 10, granularity: 'day' }, other.key);
  const spec = {
    integrationConnections: ['oa'],
    policies: ['lowered'],
    runtime: { type: 'openai', model: 'gpt-4o-mini' },
  };
  await model(w.server, 'lowered', spec, 'DEPLOYED', other.key);
  await budget(w.server, 'lowered', { output: 100_000, granularity: 'day' });
  await model(w.server, 'lowered', spec);
  const call = (key: string, ws = 'default') =>
    fetch(`${runUrl(w.server, 'lowered', ws)}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: PROMPT }], max_tokens: MAX_TOKENS }),
    });
  const theirs = await call(other.key, other.home);
  assert.equal(theirs.status, 422, 'their 10-token policy refuses 50');
  assert.match((await theirs.json()).detail, /policy lowered allows 10/);
  for (let i = 0; i < 3; i++) {
    const r = await call(w.server.adminKey);
    assert.equal(r.status, 200, `the default workspace's own policy allows it: ${await r.clone().text()}`);
    await r.arrayBuffer();
  }
  await ok(
    w.server.api('/policies/lowered', {
      method: 'PUT',
      json: {
        metadata: { name: 'lowered' },
        spec: { type: 'maxToken', maxTokens: { output: 20, granularity: 'day' } },
      },
    }),
  );
  const sent = w.fake.requests.length;
  const r = await call(w.server.adminKey);
  assert.equal(r.status, 422, `the lowered limit judged the next call: ${await r.clone().text()}`);
  assert.match((await r.json()).detail, /policy lowered allows 20 per day/);
  assert.equal(w.fake.requests.length, sent, 'the provider was not asked');
});
