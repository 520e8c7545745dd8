// Review finding G-B: a model endpoint did not pin its model; any `model` in the body went to the provider as
// is, so access to a cheap endpoint was access to every model its connection's key can reach. A tenant's
// viewer key tries other models every way a call can name one (body, path, form, batch); each is refused
// before the provider is asked, while the endpoint's name, its model and no model keep working with the
// clients that send them.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import Anthropic from '@anthropic-ai/sdk';
import { ChatOpenAI } from '@langchain/openai';
import { generateText } from 'ai';
import OpenAI from 'openai';
import { newTenant } from '../../src/test-support/tenants.js';
import { connection, model, ok, runUrl, startWorld, type World } from './setup.js';

let w: World;
let owner: string;
let caller: string;

const WS = 'acme';
const CHEAP = 'gpt-4o-mini';
const OTHER = 'o3-pro';

const openaiFor = (name: string) =>
  new OpenAI({ apiKey: caller, baseURL: `${runUrl(w.server, name, WS)}/v1`, maxRetries: 0 });

const post = (name: string, path: string, body: BodyInit, headers: Record<string, string> = {}) =>
  fetch(`${runUrl(w.server, name, WS)}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${caller}`, ...headers },
    body,
  });

/** Whether any request the provider received named `m`, in its body or its path. */
const providerSaw = (m: string) =>
  w.fake.requests.some((r) => r.path.includes(m) || JSON.stringify(r.body ?? '').includes(m));

before(async () => {
  w = await startWorld();
  owner = (await newTenant(w.server, WS)).key;
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
  const endpoint = (name: string, conn: string, runtime: Record<string, string>) =>
    model(w.server, name, { integrationConnections: [conn], runtime }, 'DEPLOYED', owner);
  await endpoint('cheap', 'oa', { type: 'openai', model: CHEAP });
  await endpoint('claude', 'an', { type: 'anthropic', model: 'fake-claude' });
  await endpoint('flash', 'gm', { type: 'gemini', model: 'gemini-2.5-flash' });
  await endpoint('open', 'oa', { type: 'openai' });
});
after(() => w.close());

test('a body naming another model is refused before the provider sees it, whole and streamed', async () => {
  for (const stream of [false, true])
    await assert.rejects(
      openaiFor('cheap').chat.completions.create({
        model: OTHER,
        messages: [{ role: 'user', content: 'Hi' }],
        stream,
      }),
      (e: any) =>
        e.status === 403 &&
        new RegExp(`serves ${CHEAP} only; this call names ${OTHER} in its body`).test(e.message),
    );
  await assert.rejects(
    openaiFor('cheap').embeddings.create({ model: 'text-embedding-3-large', input: 'x' }),
    (e: any) => e.status === 403,
  );
  assert.ok(!providerSaw(OTHER) && !providerSaw('text-embedding-3-large'), 'the provider never saw them');
});

test('the endpoint’s name, its model, and no model all reach the provider as its model', async () => {
  const client = openaiFor('cheap');
  for (const m of ['cheap', CHEAP]) {
    const r = await client.chat.completions.create({ model: m, messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(r.choices[0].message.content, 'Hello from the fake provider');
    assert.equal(w.fake.requests.at(-1)!.body.model, CHEAP);
  }
  const bare = await post(
    'cheap',
    '/v1/chat/completions',
    JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }] }),
    {
      'content-type': 'application/json',
    },
  );
  assert.equal(bare.status, 200);
  assert.equal(w.fake.requests.at(-1)!.body.model, CHEAP);
  const provider = createOpenAI({ apiKey: caller, baseURL: `${runUrl(w.server, 'cheap', WS)}/v1` });
  const { text } = await generateText({ model: provider.chat('cheap'), prompt: 'Hi' });
  assert.equal(text, 'Hello from the fake provider');
  // What the service's SDK wrappers send: the endpoint's spec model.
  const lc = new ChatOpenAI({
    model: CHEAP,
    apiKey: caller,
    configuration: { baseURL: `${runUrl(w.server, 'cheap', WS)}/v1` },
    maxRetries: 0,
  });
  assert.equal((await lc.invoke('Hi')).content, 'Hello from the fake provider');
  assert.equal(w.fake.requests.at(-1)!.body.model, CHEAP);
});

test('LangChain’s own default model name is another model: refused with what to name instead', async () => {
  const lc = new ChatOpenAI({
    apiKey: caller,
    configuration: { baseURL: `${runUrl(w.server, 'cheap', WS)}/v1` },
    maxRetries: 0,
  });
  await assert.rejects(lc.invoke('Hi'), (e: any) =>
    new RegExp(
      `serves ${CHEAP} only; this call names gpt-3.5-turbo in its body: name ${CHEAP}, cheap, or no model`,
    ).test(e.message),
  );
  assert.ok(!providerSaw('gpt-3.5-turbo'));
});

test('@anthropic-ai/sdk: another model is a permission_error; the endpoint’s name is served', async () => {
  const anthropic = new Anthropic({ apiKey: caller, baseURL: runUrl(w.server, 'claude', WS), maxRetries: 0 });
  await assert.rejects(
    anthropic.messages.create({
      model: 'claude-opus-4-1',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'Hi' }],
    }),
    (e: any) => e instanceof Anthropic.PermissionDeniedError && /serves fake-claude only/.test(e.message),
  );
  const m = await anthropic.messages.create({
    model: 'claude',
    max_tokens: 2,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.equal(m.usage.output_tokens, 2);
  assert.equal(w.fake.requests.at(-1)!.body.model, 'fake-claude');
  assert.ok(!providerSaw('claude-opus-4-1'));
});

test('Gemini names the model in the path: another is refused, the endpoint’s name becomes its model', async () => {
  const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] });
  const json = { 'content-type': 'application/json' };
  const other = await post('flash', '/v1beta/models/gemini-2.5-pro:generateContent', body, json);
  assert.equal(other.status, 403);
  assert.match(
    (await other.json()).detail,
    /serves gemini-2.5-flash only; this call names gemini-2.5-pro in its path/,
  );
  const streamed = await post(
    'flash',
    '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
    body,
    json,
  );
  assert.equal(streamed.status, 403);
  await streamed.arrayBuffer();
  assert.ok(!providerSaw('gemini-2.5-pro'));
  // A raw client sends dot segments as they are (fetch would resolve them): the provider's URL parser would.
  const dotted = await new Promise<number>((resolve, reject) => {
    const u = new URL(runUrl(w.server, 'flash', WS));
    const r = request(
      {
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: `${u.pathname}/v1beta/models/x/../gemini-2.5-pro:generateContent`,
        headers: { authorization: `Bearer ${caller}`, 'content-type': 'application/json' },
      },
      (res) => res.resume().on('end', () => resolve(res.statusCode!)),
    );
    r.on('error', reject);
    r.end(body);
  });
  assert.equal(dotted, 400);
  assert.ok(!providerSaw('gemini-2.5-pro'));
  for (const named of ['flash', 'gemini-2.5-flash']) {
    const r = await post('flash', `/v1beta/models/${named}:generateContent`, body, json);
    assert.equal(r.status, 200);
    assert.equal((await r.json()).candidates[0].content.parts[0].text, 'Hello from the fake provider');
    assert.equal(w.fake.requests.at(-1)!.path, '/v1beta/models/gemini-2.5-flash:generateContent');
  }
});

test('reads other than inference stay readable: the models list', async () => {
  const page = await openaiFor('cheap').models.list();
  assert.equal(page.data[0].id, 'fake-gpt');
});

test('an endpoint whose spec names no model serves only calls that name none', async () => {
  await assert.rejects(
    openaiFor('open').chat.completions.create({ model: OTHER, messages: [{ role: 'user', content: 'Hi' }] }),
    (e: any) => e.status === 403 && /names no model \(spec.runtime.model\)/.test(e.message),
  );
  const r = await post(
    'open',
    '/v1/chat/completions',
    JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }] }),
    {
      'content-type': 'application/json',
    },
  );
  assert.equal(r.status, 200);
  assert.equal(w.fake.requests.at(-1)!.body.model, undefined);
  assert.ok(!providerSaw(OTHER));
});

test('batch APIs, which run models named in files or nested requests, are refused', async () => {
  const json = { 'content-type': 'application/json' };
  const openaiBatch = await post(
    'cheap',
    '/v1/batches',
    JSON.stringify({ input_file_id: 'file-1', endpoint: '/v1/chat/completions', completion_window: '24h' }),
    json,
  );
  assert.equal(openaiBatch.status, 403);
  const anthropicBatch = await post(
    'claude',
    '/v1/messages/batches',
    JSON.stringify({
      requests: [{ custom_id: 'a', params: { model: 'claude-opus-4-1', max_tokens: 5, messages: [] } }],
    }),
    json,
  );
  assert.equal(anthropicBatch.status, 403);
  assert.ok(!w.fake.requests.some((r) => r.path.endsWith('/batches')));
});

test('a form naming another model is refused; one naming the endpoint goes with its model', async () => {
  const form = (m: string) => {
    const f = new FormData();
    f.set('file', new Blob(['RIFF-audio']), 'a.wav');
    f.set('model', m);
    return f;
  };
  const other = await post('cheap', '/v1/audio/transcriptions', form('gpt-4o-transcribe'));
  assert.equal(other.status, 403);
  assert.ok(!providerSaw('gpt-4o-transcribe'));
  await post('cheap', '/v1/audio/transcriptions', form('cheap'));
  const seen = w.fake.requests.at(-1)!;
  assert.equal(seen.path, '/v1/audio/transcriptions');
  assert.match(String(seen.body), new RegExp(`name="model"\\r\\n\\r\\n${CHEAP}\\r\\n`));
  assert.match(String(seen.body), /RIFF-audio/);
});

test('a JSON body the gateway would not read (UTF-16, or behind a byte order mark) cannot carry a model past it', async () => {
  const named = JSON.stringify({ model: OTHER, messages: [{ role: 'user', content: 'Hi' }] });
  const wide = Buffer.from(`\ufeff${named}`, 'utf16le');
  const r16 = await post('cheap', '/v1/chat/completions', new Uint8Array(wide));
  assert.equal(r16.status, 415);
  const bom = await post('cheap', '/v1/chat/completions', `\ufeff${named}`, { 'content-type': 'text/plain' });
  assert.equal(bom.status, 403);
  assert.ok(!providerSaw(OTHER));
});
