// The real `@anthropic-ai/sdk` client against an Anthropic-type model endpoint, and the `openai` client
// against the same endpoint through the OpenAI-compatible /v1/chat/completions (translated both ways).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { connection, eventually, model, ok, PROVIDER_KEY, runUrl, startWorld, type World } from './setup.js';

let w: World;
let anthropic: Anthropic;
let openai: OpenAI;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'claude-conn', 'anthropic', w.fake.url);
  await model(w.server, 'claude', {
    integrationConnections: ['claude-conn'],
    runtime: { type: 'anthropic', model: 'fake-claude' },
  });
  anthropic = new Anthropic({
    apiKey: w.server.adminKey,
    baseURL: runUrl(w.server, 'claude'),
    maxRetries: 0,
  });
  openai = new OpenAI({
    apiKey: w.server.adminKey,
    baseURL: `${runUrl(w.server, 'claude')}/v1`,
    maxRetries: 0,
  });
});
after(() => w.close());

const lastRequest = () => w.fake.requests.at(-1)!;
const weather = {
  name: 'weather',
  description: 'Weather of a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } },
};

test('anthropic client: messages with the provider key swapped in for the Berth key', async () => {
  const m = await anthropic.messages.create({
    model: 'claude',
    max_tokens: 3,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.deepEqual(m.content, [{ type: 'text', text: 'Hello from the' }]);
  assert.equal(m.usage.output_tokens, 3);
  const seen = lastRequest();
  assert.equal(seen.headers['x-api-key'], PROVIDER_KEY);
  assert.match(
    String(seen.headers['anthropic-version']),
    /^\d{4}-\d{2}-\d{2}$/,
    'the client’s own API version is kept',
  );
  assert.equal(seen.body.model, 'fake-claude');
  assert.equal(seen.headers.authorization, undefined);
});

test('a caller that names no anthropic-version (curl with x-api-key) gets the default one', async () => {
  const res = await fetch(`${runUrl(w.server, 'claude')}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': w.server.adminKey, 'content-type': 'application/json' },
    body: JSON.stringify({ max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] }),
  });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).content[0].text, 'Hello from');
  assert.equal(lastRequest().headers['anthropic-version'], '2023-06-01');
  assert.equal(lastRequest().body.model, 'fake-claude', 'a body naming no model gets the endpoint’s');
});

test('anthropic client: streaming events pass through unchanged', async () => {
  const stream = anthropic.messages.stream({
    model: 'claude',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  const deltas: string[] = [];
  stream.on('text', (t) => deltas.push(t));
  const final = await stream.finalMessage();
  assert.equal(deltas.length, 5);
  assert.equal(deltas.join(''), 'Hello from the fake provider');
  assert.equal(final.usage.output_tokens, 5);
});

test('anthropic client: tool use', async () => {
  const m = await anthropic.messages.create({
    model: 'claude',
    max_tokens: 50,
    tools: [weather],
    messages: [{ role: 'user', content: 'Paris?' }],
  });
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.ok(use && use.type === 'tool_use');
  assert.deepEqual(use.input, { city: 'Paris' });
  assert.equal(m.stop_reason, 'tool_use');
});

test('anthropic client: a provider error keeps its message; models list through the gateway', async () => {
  await assert.rejects(
    anthropic.messages.create({
      model: 'claude',
      max_tokens: 5,
      messages: [{ role: 'user', content: '[status 400]' }],
    }),
    (e: any) => e instanceof Anthropic.BadRequestError && /fake error 400 as asked/.test(e.message),
  );
  const page = await anthropic.models.list();
  assert.equal(page.data[0].id, 'fake-claude');
});

test('GET /v0/integrations/connections/{name}/models lists the provider’s models', async () => {
  const list = await ok(w.server.api('/integrations/connections/claude-conn/models'));
  assert.deepEqual(list, [
    { id: 'fake-claude', displayName: 'Fake Claude', createdAt: '2025-01-01T00:00:00Z' },
  ]);
});

test('openai client over Anthropic: text, with system prompt lifted and max_tokens supplied', async () => {
  const r = await openai.chat.completions.create({
    model: 'claude',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ],
    max_tokens: 4,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.content, 'Hello from the fake');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage?.completion_tokens, 4);
  const seen = lastRequest();
  assert.equal(seen.path, '/v1/messages');
  assert.equal(seen.body.system, 'Be brief.');
  assert.deepEqual(seen.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }]);
  assert.equal(seen.body.max_tokens, 4);
});

test('openai client over Anthropic: a call with no max_tokens gets the model’s default ceiling', async () => {
  w.fake.fail(400); // keep the fake from writing thousands of words; the request is what matters here
  await assert.rejects(
    openai.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'Hi' }] }),
  );
  assert.equal(lastRequest().body.max_tokens, 4096);
});

test('openai client over Anthropic: streaming, with usage when asked', async () => {
  const stream = await openai.chat.completions.create({
    model: 'claude',
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 5,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | undefined | null;
  let finish: string | null | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, 'Hello from the fake provider');
  assert.equal(finish, 'length');
  assert.equal(usage?.completion_tokens, 5);
  assert.ok((usage?.prompt_tokens ?? 0) > 0);
});

test('openai client over Anthropic: tool calls translated both ways, streamed and not', async () => {
  const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
    {
      type: 'function',
      function: { name: 'weather', description: 'Weather of a city', parameters: weather.input_schema },
    },
  ];
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'user', content: 'Paris?' },
  ];
  const r = await openai.chat.completions.create({
    model: 'claude',
    messages,
    tools,
    tool_choice: 'required',
    max_tokens: 50,
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls?.[0];
  assert.ok(call && call.type === 'function');
  assert.equal(call.id, 'toolu_fake1');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  const sent = lastRequest().body;
  assert.deepEqual(sent.tools, [
    { name: 'weather', description: 'Weather of a city', input_schema: weather.input_schema },
  ]);
  assert.deepEqual(sent.tool_choice, { type: 'any' });

  const r2 = await openai.chat.completions.create({
    model: 'claude',
    tools,
    max_tokens: 50,
    messages: [...messages, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
  });
  assert.equal(r2.choices[0].message.content, 'The tool said: sunny');
  const turns = lastRequest().body.messages;
  assert.deepEqual(turns[1].content.at(-1), {
    type: 'tool_use',
    id: 'toolu_fake1',
    name: 'weather',
    input: { city: 'Paris' },
  });
  assert.deepEqual(turns[2], {
    role: 'user',
    content: [{ type: 'tool_result', tool_use_id: 'toolu_fake1', content: 'sunny' }],
  });

  const stream = await openai.chat.completions.create({
    model: 'claude',
    messages,
    tools,
    max_tokens: 50,
    stream: true,
  });
  let args = '';
  let name = '';
  let id = '';
  for await (const chunk of stream)
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      id += tc.id ?? '';
      name += tc.function?.name ?? '';
      args += tc.function?.arguments ?? '';
    }
  assert.equal(id, 'toolu_fake1');
  assert.equal(name, 'weather');
  assert.deepEqual(JSON.parse(args), { city: 'Paris' });
});

test('translated calls are metered from Anthropic’s usage', async () => {
  await openai.chat.completions.create({
    model: 'claude',
    messages: [{ role: 'user', content: 'meter' }],
    max_tokens: 6,
  });
  await eventually(
    () => ok(w.server.api('/models/claude/usage')),
    (rows: any[]) => rows.reduce((n, r) => n + r.outputTokens, 0) >= 6 && rows.every((r) => r.requests >= 1),
    'usage of the translated call',
  );
});
