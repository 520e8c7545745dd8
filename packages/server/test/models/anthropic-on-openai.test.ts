// The real `@anthropic-ai/sdk` client, unmodified, against a model endpoint backed by an OpenAI provider
// (issue 28: it used to get the provider's `404 Invalid URL (POST /v1/messages)`). Berth translates the
// Messages request to chat completions and the answer back, streamed and not; the fake provider speaks
// OpenAI's real wire and records what reached it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAnthropic } from '@ai-sdk/anthropic';
import Anthropic from '@anthropic-ai/sdk';
import { ChatAnthropic } from '@langchain/anthropic';
import { generateText, streamText } from 'ai';
import { newTenant } from '../../src/test-support/tenants.js';
import { connection, eventually, model, ok, PROVIDER_KEY, runUrl, startWorld, type World } from './setup.js';

let w: World;
let anthropic: Anthropic;
let owner: string;

const WS = 'acme';
const weather = {
  name: 'weather',
  description: 'Weather of a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } },
};
const lastRequest = () => w.fake.requests.at(-1)!;

before(async () => {
  w = await startWorld();
  owner = (await newTenant(w.server, WS)).key;
  await connection(w.server, 'oa', 'openai', w.fake.url, undefined, owner);
  await model(
    w.server,
    'gpt',
    { integrationConnections: ['oa'], runtime: { type: 'openai', model: 'gpt-4o' } },
    'DEPLOYED',
    owner,
  );
  anthropic = new Anthropic({ apiKey: owner, baseURL: runUrl(w.server, 'gpt', WS), maxRetries: 0 });
});
after(() => w.close());

test('messages.create on an OpenAI-backed endpoint: translated to chat completions and back', async () => {
  const m = await anthropic.messages.create({
    model: 'gpt',
    max_tokens: 3,
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'Hi' }],
    stop_sequences: ['END'],
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.deepEqual(m.content, [{ type: 'text', text: 'Hello from the' }]);
  assert.equal(m.stop_reason, 'end_turn');
  assert.equal(m.usage.output_tokens, 3);
  assert.ok(m.usage.input_tokens > 0, 'the provider’s prompt count comes back as input_tokens');
  const seen = lastRequest();
  assert.equal(seen.path, '/v1/chat/completions');
  assert.equal(seen.headers.authorization, `Bearer ${PROVIDER_KEY}`);
  assert.equal(seen.headers['x-api-key'], undefined, 'the Berth key never reaches the provider');
  assert.equal(seen.headers['anthropic-version'], undefined);
  assert.equal(seen.body.model, 'gpt-4o');
  assert.deepEqual(seen.body.messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hi' },
  ]);
  assert.equal(seen.body.max_completion_tokens, 3, 'OpenAI’s own limit field');
  assert.deepEqual(seen.body.stop, ['END']);
});

test('@ai-sdk/anthropic and LangChain ChatAnthropic on an OpenAI-backed endpoint: translated both ways', async () => {
  const provider = createAnthropic({ apiKey: owner, baseURL: runUrl(w.server, 'gpt', WS) });
  const whole = await generateText({
    model: provider('gpt'),
    prompt: 'Hi',
    maxOutputTokens: 3,
    maxRetries: 0,
  });
  assert.equal(whole.text, 'Hello from the');
  assert.equal(whole.usage.outputTokens, 3);
  assert.equal(lastRequest().path, '/v1/chat/completions');
  assert.equal(lastRequest().body.max_completion_tokens, 3);
  const streamed = streamText({ model: provider('gpt'), prompt: 'Hi', maxOutputTokens: 3, maxRetries: 0 });
  assert.equal(await streamed.text, 'Hello from the');
  assert.equal(lastRequest().body.stream, true);
  const chat = new ChatAnthropic({
    apiKey: owner,
    anthropicApiUrl: runUrl(w.server, 'gpt', WS),
    model: 'gpt',
    maxTokens: 3,
    maxRetries: 0,
  });
  const answer = await chat.invoke('Hi');
  assert.equal(answer.content, 'Hello from the');
  assert.equal(lastRequest().path, '/v1/chat/completions');
  assert.equal(lastRequest().headers.authorization, `Bearer ${PROVIDER_KEY}`);
  let text = '';
  for await (const chunk of await chat.stream('Hi'))
    text += typeof chunk.content === 'string' ? chunk.content : '';
  assert.equal(text, 'Hello from the');
});

test('messages.stream: chat chunks become Anthropic events, final message with the provider’s usage', async () => {
  const stream = anthropic.messages.stream({
    model: 'gpt',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  const deltas: string[] = [];
  stream.on('text', (t) => deltas.push(t));
  const final = await stream.finalMessage();
  assert.equal(deltas.length, 5);
  assert.equal(deltas.join(''), 'Hello from the fake provider');
  assert.deepEqual(final.content, [{ type: 'text', text: 'Hello from the fake provider' }]);
  assert.equal(final.stop_reason, 'end_turn');
  assert.equal(final.usage.output_tokens, 5);
  assert.ok(final.usage.input_tokens > 0);
  assert.deepEqual(
    lastRequest().body.stream_options,
    { include_usage: true },
    'Berth asks for the usage Anthropic’s message_delta carries',
  );
});

test('tool use both ways: tool_use comes back, tool_result goes as a tool message', async () => {
  const m = await anthropic.messages.create({
    model: 'gpt',
    max_tokens: 50,
    tools: [weather],
    tool_choice: { type: 'any', disable_parallel_tool_use: true },
    messages: [{ role: 'user', content: 'Paris?' }],
  });
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.ok(use && use.type === 'tool_use');
  assert.equal(use.name, 'weather');
  assert.deepEqual(use.input, { city: 'Paris' });
  assert.equal(m.stop_reason, 'tool_use');
  const sent = lastRequest().body;
  assert.deepEqual(sent.tools, [
    {
      type: 'function',
      function: { name: 'weather', description: 'Weather of a city', parameters: weather.input_schema },
    },
  ]);
  assert.equal(sent.tool_choice, 'required');
  assert.equal(sent.parallel_tool_calls, false);

  const answer = await anthropic.messages.create({
    model: 'gpt',
    max_tokens: 50,
    tools: [weather],
    messages: [
      { role: 'user', content: 'Paris?' },
      { role: 'assistant', content: m.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny' }] },
    ],
  });
  assert.deepEqual(answer.content, [{ type: 'text', text: 'The tool said: Sunny' }]);
  assert.deepEqual(lastRequest().body.messages.slice(1), [
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: use.id, type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
      ],
    },
    { role: 'tool', tool_call_id: use.id, content: 'Sunny' },
  ]);
});

test('a streamed tool call arrives as a tool_use block with its input', async () => {
  const final = await anthropic.messages
    .stream({
      model: 'gpt',
      max_tokens: 50,
      tools: [weather],
      messages: [{ role: 'user', content: 'Paris?' }],
    })
    .finalMessage();
  const use = final.content.find((b) => b.type === 'tool_use');
  assert.ok(use && use.type === 'tool_use');
  assert.deepEqual(use.input, { city: 'Paris' });
  assert.equal(final.stop_reason, 'tool_use');
});

test('errors are Anthropic’s shape; what chat cannot do is refused by name, never dropped', async () => {
  await assert.rejects(
    anthropic.messages.create({
      model: 'gpt',
      max_tokens: 5,
      messages: [{ role: 'user', content: '[status 400]' }],
    }),
    (e: any) => e instanceof Anthropic.BadRequestError && /fake error 400 as asked/.test(e.message),
  );
  const sent = w.fake.requests.length;
  await assert.rejects(
    anthropic.messages.create({
      model: 'gpt',
      max_tokens: 5,
      ...({ top_k: 5 } as object),
      messages: [{ role: 'user', content: 'Hi' }],
    }),
    (e: any) => e instanceof Anthropic.BadRequestError && /top_k/.test(e.message),
  );
  await assert.rejects(
    anthropic.messages.countTokens({ model: 'gpt', messages: [{ role: 'user', content: 'Hi' }] }),
    (e: any) => e.status === 503 && /speaks the API of \/v1\/messages\/count_tokens/.test(e.message),
  );
  assert.equal(w.fake.requests.length, sent, 'neither reached the provider');
});

test('translated calls are metered from the provider’s usage', async () => {
  await anthropic.messages.create({
    model: 'gpt',
    max_tokens: 6,
    messages: [{ role: 'user', content: 'meter' }],
  });
  await eventually(
    () => ok(w.server.api('/models/gpt/usage', { key: owner })),
    (rows: any[]) => rows.reduce((n, r) => n + r.outputTokens, 0) >= 6,
    'usage of the translated call',
  );
});

test('a second tenant cannot call the first one’s endpoint with its own key', async () => {
  const other = await newTenant(w.server, 'other');
  const sent = w.fake.requests.length;
  const intruder = new Anthropic({ apiKey: other.key, baseURL: runUrl(w.server, 'gpt', WS), maxRetries: 0 });
  await assert.rejects(
    intruder.messages.create({ model: 'gpt', max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] }),
    (e: any) => e.status === 403 || e.status === 404 || e.status === 401,
  );
  assert.equal(w.fake.requests.length, sent);
});
