// Review finding G-A: a call without max_tokens overran its budget (it reserved 1,024 output tokens but was
// not capped: 5,000 of a 2,000-token budget on OpenAI; on the translated Anthropic path Berth itself sent
// max_tokens 4,096). A tenant's viewer key calls its endpoints with the real clients; the fake model writes
// 5,000 tokens whenever it is not told a limit. Every call must reach the provider with the limit it
// reserved for, the window must never pass its limit, and a call left less than the minimum is refused with
// the policy named.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { newTenant } from '../../src/test-support/tenants.js';
import { budget, connection, eventually, model, ok, runUrl, startWorld, type World } from './setup.js';

let w: World;
let owner: string;
let caller: string;

const WS = 'acme';
/** A prompt after which the fake model writes 5,000 tokens unless the request limits it. */
const LONG = 'Tell me everything you know. [length 5000]';
const BUDGET = 2000;

const policy = (name: string, maxTokens: Record<string, number>) =>
  budget(w.server, name, { ...maxTokens, granularity: 'day' }, owner);

const endpoint = (name: string, type: string, conn: string, spec: string, policies: string[]) =>
  model(
    w.server,
    name,
    { integrationConnections: [conn], policies, runtime: { type, model: spec } },
    'DEPLOYED',
    owner,
  );

const windowOf = (name: string) =>
  eventually(
    () => ok(w.server.api(`/policies/${name}/usages`, { key: owner })),
    (ws: any[]) => ws[0]?.reserved.input === 0 && ws[0]?.reserved.output === 0,
    `reservations of ${name} settled`,
  ).then((ws: any[]) => ws[0]);

const openaiFor = (name: string) =>
  new OpenAI({ apiKey: caller, baseURL: `${runUrl(w.server, name, WS)}/v1`, maxRetries: 0 });

/** The output limit the provider was sent, in whichever field its API reads. */
const limitSent = (b: any) => b.max_completion_tokens ?? b.max_tokens ?? b.max_output_tokens;

before(async () => {
  w = await startWorld();
  const acme = await newTenant(w.server, WS);
  owner = acme.key;
  const sa = await ok(
    w.server.api('/service_accounts', {
      method: 'POST',
      json: { name: 'caller', role: 'viewer' },
      key: owner,
    }),
  );
  caller = (
    await ok(
      w.server.api(`/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {}, key: owner }),
    )
  ).apiKey;
  await connection(w.server, 'oa', 'openai', w.fake.url, undefined, owner);
  await connection(w.server, 'an', 'anthropic', w.fake.url, undefined, owner);
  await connection(w.server, 'gm', 'gemini', w.fake.url, undefined, owner);
  for (const p of ['gpt', 'gpt-s', 'claude', 'claude-s', 'claude-native', 'gpt-resp'])
    await policy(`total-${p}`, { total: BUDGET });
  for (const p of ['gpt-min', 'gpt-alias', 'gpt-n', 'gem']) await policy(`out-${p}`, { output: BUDGET });
  await policy('tiny', { output: 10 });
  await endpoint('gpt', 'openai', 'oa', 'gpt-4o', ['total-gpt']);
  await endpoint('gpt-s', 'openai', 'oa', 'gpt-4o', ['total-gpt-s']);
  await endpoint('gpt-resp', 'openai', 'oa', 'gpt-4o', ['total-gpt-resp']);
  await endpoint('gpt-min', 'openai', 'oa', 'gpt-4o', ['out-gpt-min']);
  await endpoint('gpt-alias', 'openai', 'oa', 'gpt-4o', ['out-gpt-alias']);
  await endpoint('gpt-n', 'openai', 'oa', 'gpt-4o', ['out-gpt-n']);
  await endpoint('gpt-tiny', 'openai', 'oa', 'gpt-4o', ['tiny']);
  await endpoint('gpt-free', 'openai', 'oa', 'gpt-4o', []);
  await endpoint('claude', 'anthropic', 'an', 'fake-claude', ['total-claude']);
  await endpoint('claude-s', 'anthropic', 'an', 'fake-claude', ['total-claude-s']);
  await endpoint('claude-native', 'anthropic', 'an', 'fake-claude', ['total-claude-native']);
  await endpoint('gem', 'gemini', 'gm', 'gemini-2.5-flash', ['out-gem']);
  await budget(w.server, 'hourly-1k', { total: 1000, granularity: 'hour' }, owner);
  await endpoint('gpt-1k', 'openai', 'oa', 'gpt-4o', ['hourly-1k']);
});
after(() => w.close());

/**
 * Default calls (no max_tokens) with the openai client until the budget refuses one. Each call that went
 * through must have carried a limit, and produced no more than it; the refusal must name the policy.
 */
async function drain(name: string, stream: boolean) {
  const client = openaiFor(name);
  const limits: number[] = [];
  for (let i = 0; i < 6; i++) {
    const sentBefore = w.fake.requests.length;
    try {
      let produced: number;
      if (stream) {
        const s = await client.chat.completions.create({
          model: name,
          messages: [{ role: 'user', content: LONG }],
          stream: true,
          stream_options: { include_usage: true },
        });
        produced = 0;
        for await (const c of s) if (c.usage) produced = c.usage.completion_tokens;
      } else {
        const r = await client.chat.completions.create({
          model: name,
          messages: [{ role: 'user', content: LONG }],
        });
        produced = r.usage!.completion_tokens;
      }
      const limit = limitSent(w.fake.requests.at(-1)!.body);
      assert.equal(typeof limit, 'number', `call ${i + 1} reached the provider with a limit`);
      assert.ok(produced <= limit, `call ${i + 1} produced ${produced} of ${limit}`);
      limits.push(limit);
    } catch (e: any) {
      assert.equal(w.fake.requests.length, sentBefore, 'a refused call never reaches the provider');
      assert.equal(e.status, 429, e.message);
      assert.match(e.message, new RegExp(`policy total-${name} allows ${BUDGET}`));
      const win = await windowOf(`total-${name}`);
      assert.ok(
        win.used.input + win.used.output <= BUDGET,
        `the window used ${win.used.input + win.used.output} of ${BUDGET}`,
      );
      return limits;
    }
  }
  assert.fail(`six default calls went through a ${BUDGET}-token budget: limits ${limits}`);
}

test('OpenAI-backed: calls without max_tokens are capped to what they reserved; the budget is never passed', async () => {
  const limits = await drain('gpt', false);
  assert.equal(limits[0], 1024, 'the first call gets the output estimate');
  assert.ok(limits.length >= 2 && limits[1] < 1024, `the next one what was left: ${limits}`);
  assert.equal(w.fake.requests.at(-1)!.body.max_tokens, undefined, 'OpenAI is sent max_completion_tokens');
});

test('OpenAI-backed, streamed: the same cap, and the stream stops at it', async () => {
  const limits = await drain('gpt-s', true);
  assert.equal(limits[0], 1024);
});

test('Anthropic-backed (translated): Berth sends the reserved limit upstream, never 4,096', async () => {
  const limits = await drain('claude', false);
  assert.equal(limits[0], 1024);
  assert.equal(w.fake.requests.at(-1)!.path, '/v1/messages');
});

test('Anthropic-backed (translated), streamed: the same cap', async () => {
  const limits = await drain('claude-s', true);
  assert.equal(limits[0], 1024);
});

test('the Responses API without max_output_tokens is capped the same way', async () => {
  const r = await openaiFor('gpt-resp').responses.create({ model: 'gpt-resp', input: LONG });
  assert.equal(w.fake.requests.at(-1)!.body.max_output_tokens, 1024);
  assert.equal(r.usage?.output_tokens, 1024);
});

test('less than the minimum left: a call without a limit is refused naming the policy; one with a small limit fits', async () => {
  const client = openaiFor('gpt-min');
  await client.chat.completions.create({
    model: 'gpt-min',
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 1950,
  });
  const sent = w.fake.requests.length;
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-min', messages: [{ role: 'user', content: LONG }] }),
    (e: any) =>
      e.status === 429 &&
      /policy out-gpt-min allows 2000 output tokens per day/.test(e.message) &&
      /sets no output limit, and Berth gives such a call at least 64 output tokens/.test(e.message),
  );
  assert.equal(w.fake.requests.length, sent, 'refused before the provider was asked');
  const small = await client.chat.completions.create({
    model: 'gpt-min',
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 40,
  });
  assert.equal(small.usage?.completion_tokens, 40);
  const win = await windowOf('out-gpt-min');
  assert.equal(win.used.output, 1990);
});

test('a policy allowing less than the minimum at all refuses calls without a limit as a policy denial', async () => {
  await assert.rejects(
    openaiFor('gpt-tiny').chat.completions.create({
      model: 'gpt-tiny',
      messages: [{ role: 'user', content: 'Hi' }],
    }),
    (e: any) =>
      e.status === 422 &&
      /may use 64 output tokens \(it sets no output limit.*\) but policy tiny allows 10 per day/.test(
        e.message,
      ),
  );
});

test('a limit in a field the chat API does not read reserves nothing: Berth still caps the call', async () => {
  const res = await fetch(`${runUrl(w.server, 'gpt-alias', WS)}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${caller}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: LONG }], max_output_tokens: 5 }),
  });
  assert.equal(res.status, 200);
  assert.equal(w.fake.requests.at(-1)!.body.max_completion_tokens, 1024);
  const win = await windowOf('out-gpt-alias');
  assert.ok(win.used.output <= BUDGET, `used ${win.used.output}`);
});

test('several answers at once (n) share what is left: each is capped to its part', async () => {
  await openaiFor('gpt-n').chat.completions.create({
    model: 'gpt-n',
    messages: [{ role: 'user', content: LONG }],
    n: 3,
  });
  const sent = w.fake.requests.at(-1)!.body;
  assert.equal(sent.n, 3);
  assert.equal(sent.max_completion_tokens, 666, 'floor(2000 / 3) each, within the output estimate');
});

test('@anthropic-ai/sdk: a max_tokens that fits goes as sent; one above what is left is refused, not lowered', async () => {
  const anthropic = new Anthropic({
    apiKey: caller,
    baseURL: runUrl(w.server, 'claude-native', WS),
    maxRetries: 0,
  });
  const m = await anthropic.messages.create({
    model: 'claude-native',
    max_tokens: 1024,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.equal(m.usage.output_tokens, 1024);
  assert.equal(w.fake.requests.at(-1)!.body.max_tokens, 1024);
  const sent = w.fake.requests.length;
  await assert.rejects(
    anthropic.messages.create({
      model: 'claude-native',
      max_tokens: 1024,
      messages: [{ role: 'user', content: 'Hi' }],
    }),
    (e: any) => e.status === 429 && /policy total-claude-native allows 2000 total tokens/.test(e.message),
  );
  assert.equal(w.fake.requests.length, sent);
  const fits = await anthropic.messages.create({
    model: 'claude-native',
    max_tokens: 500,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.equal(fits.usage.output_tokens, 500);
});

test('Gemini’s native API: generationConfig.maxOutputTokens is set to what the call reserved', async () => {
  const res = await fetch(`${runUrl(w.server, 'gem', WS)}/v1beta/models/gem:generateContent`, {
    method: 'POST',
    headers: { authorization: `Bearer ${caller}`, 'content-type': 'application/json' },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: LONG }] }] }),
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  const seen = w.fake.requests.at(-1)!;
  assert.equal(seen.path, '/v1beta/models/gemini-2.5-flash:generateContent');
  assert.equal(seen.body.generationConfig.maxOutputTokens, 1024);
  assert.equal(body.usageMetadata.candidatesTokenCount, 1024);
  const win = await windowOf('out-gem');
  assert.equal(win.used.output, 1024);
});

test('issue 28: under a 1,000-token hourly budget a default call runs, capped to what the budget still covers', async () => {
  // An Anthropic client on the OpenAI-backed endpoint (translated): its own max_tokens is kept when it fits.
  const anthropic = new Anthropic({ apiKey: caller, baseURL: runUrl(w.server, 'gpt-1k', WS), maxRetries: 0 });
  const m = await anthropic.messages.create({
    model: 'gpt-1k',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.equal(m.usage.output_tokens, 5);
  assert.equal(w.fake.requests.at(-1)!.body.max_completion_tokens, 5);
  // The 1,024-token output estimate alone exceeds the budget: the default call is lowered to fit, not refused.
  const r = await openaiFor('gpt-1k').chat.completions.create({
    model: 'gpt-1k',
    messages: [{ role: 'user', content: LONG }],
  });
  const cap = limitSent(w.fake.requests.at(-1)!.body);
  assert.ok(cap >= 900 && cap < 1000, `capped below the whole budget, beside the rest: ${cap}`);
  assert.equal(r.usage?.completion_tokens, cap);
  const sent = w.fake.requests.length;
  await assert.rejects(
    openaiFor('gpt-1k').chat.completions.create({
      model: 'gpt-1k',
      messages: [{ role: 'user', content: LONG }],
    }),
    (e: any) => e.status === 429 && /policy hourly-1k allows 1000 total tokens per hour/.test(e.message),
  );
  assert.equal(w.fake.requests.length, sent, 'refused before the provider was asked');
  const win = await windowOf('hourly-1k');
  assert.ok(win.used.input + win.used.output <= 1000, `the window used ${JSON.stringify(win.used)}`);
});

test('without a budget nothing changes: the call goes without a limit', async () => {
  await openaiFor('gpt-free').chat.completions.create({
    model: 'gpt-free',
    messages: [{ role: 'user', content: 'Hi' }],
  });
  const sent = w.fake.requests.at(-1)!.body;
  assert.equal(limitSent(sent), undefined);
});
