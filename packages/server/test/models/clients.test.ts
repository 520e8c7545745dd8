// The clients that tripped over the gateway, each run for real against fake providers: the openai SDK's
// default stream loop and its retries on a policy 429, a stream cut by its client, default calls without
// max_tokens under a policy, the AI SDK's generateObject and LangChain's withStructuredOutput through an
// Anthropic-backed endpoint, and @ai-sdk/anthropic reading Berth's errors.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import Anthropic from '@anthropic-ai/sdk';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject, generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { budget, connection, eventually, model, ok, runUrl, startWorld, type World } from './setup.js';

let w: World;

const policy = (name: string, maxTokens: Record<string, number>) =>
  budget(w.server, name, { ...maxTokens, granularity: 'day' });

const windowOf = (name: string) =>
  eventually(
    () => ok(w.server.api(`/policies/${name}/usages`)),
    (ws: any[]) => ws[0]?.reserved.input === 0 && ws[0]?.reserved.output === 0,
    `reservations of ${name} settled`,
  ).then((ws: any[]) => ws[0]);

const openaiFor = (name: string, maxRetries = 0) =>
  new OpenAI({ apiKey: w.server.adminKey, baseURL: `${runUrl(w.server, name)}/v1`, maxRetries });

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await connection(w.server, 'an', 'anthropic', w.fake.url);
  await policy('out-2000', { output: 2000 });
  await policy('cut', { output: 100_000 });
  await policy('tight', { output: 10 });
  await model(w.server, 'gpt', {
    integrationConnections: ['oa'],
    runtime: { type: 'openai', model: 'gpt-4o' },
  });
  await model(w.server, 'gpt-limited', {
    integrationConnections: ['oa'],
    policies: ['out-2000'],
    runtime: { type: 'openai', model: 'gpt-4o' },
  });
  await model(w.server, 'gpt-cut', {
    integrationConnections: ['oa'],
    policies: ['cut'],
    runtime: { type: 'openai', model: 'gpt-4o' },
  });
  await model(w.server, 'claude', {
    integrationConnections: ['an'],
    runtime: { type: 'anthropic', model: 'fake-claude' },
  });
  await model(w.server, 'claude-tight', {
    integrationConnections: ['an'],
    policies: ['tight'],
    runtime: { type: 'anthropic', model: 'fake-claude' },
  });
});
after(() => w.close());

test('openai SDK: the default stream loop reads choices[0] of every chunk without failing', async () => {
  const stream = await openaiFor('gpt').chat.completions.create({
    model: 'gpt',
    messages: [{ role: 'user', content: 'Hi' }],
    stream: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0].delta.content ?? '';
  assert.equal(text, 'Hello from the fake provider');
  assert.equal(w.fake.requests.at(-1)!.body.stream_options?.include_usage, true, 'Berth still asks usage');
});

test('openai SDK: a caller that asked for usage still gets its usage chunk', async () => {
  const stream = await openaiFor('gpt').chat.completions.create({
    model: 'gpt',
    messages: [{ role: 'user', content: 'Hi' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let usage: any;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  assert.equal(usage?.completion_tokens, 5);
});

test('openai SDK: calls without max_tokens under an output limit are served, capped to what they reserved, and charged what they used', async () => {
  const client = openaiFor('gpt-limited');
  const r = await client.chat.completions.create({
    model: 'gpt-limited',
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.equal(r.choices[0].message.content?.split(' ').length, 1024);
  assert.equal(
    w.fake.requests.at(-1)!.body.max_completion_tokens,
    1024,
    'the provider is told the output estimate the call reserved (decision 039)',
  );
  const win = await windowOf('out-2000');
  assert.equal(win.used.output, 1024);
});

test('a stream its client cuts after 10 chunks is charged about 10 output tokens, not hundreds', async () => {
  w.fake.chunkDelayMs = 10;
  try {
    const stream = await openaiFor('gpt-cut').chat.completions.create({
      model: 'gpt-cut',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
      max_tokens: 600,
    });
    const cancelled = w.fake.nextCancel();
    let chunks = 0;
    // Leaving the loop cancels the stream (the SDK aborts its request).
    for await (const _ of stream) if (++chunks === 11) break;
    await cancelled;
    const win = await windowOf('cut');
    assert.ok(win.used.output >= 9 && win.used.output <= 12, `charged ${win.used.output} output tokens`);
  } finally {
    w.fake.chunkDelayMs = 0;
  }
});

test('a policy 429 caused by calls in flight says retry in a second; a spent window tells clients to stop', async () => {
  await policy('busy', { output: 100 });
  await model(w.server, 'gpt-busy', {
    integrationConnections: ['oa'],
    policies: ['busy'],
    runtime: { type: 'openai', model: 'gpt-4o' },
  });
  const url = `${runUrl(w.server, 'gpt-busy')}/v1/chat/completions`;
  const call = (max_tokens: number) =>
    fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens, stream: true }),
    });
  w.fake.chunkDelayMs = 20;
  const holding = await call(80);
  const blocked = await call(30);
  assert.equal(blocked.status, 429);
  assert.equal(blocked.headers.get('retry-after'), '1');
  assert.match((await blocked.json()).detail, /calls in flight/);
  await holding.text();
  w.fake.chunkDelayMs = 0;
  // The openai SDK retries on its own after Retry-After: the held tokens are back by then.
  const retried = await openaiFor('gpt-busy', 2).chat.completions.create({
    model: 'gpt-busy',
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 15,
  });
  assert.equal(retried.usage?.completion_tokens, 15);
  const spent = await call(30);
  assert.equal(spent.status, 429);
  assert.equal(spent.headers.get('x-should-retry'), 'false');
  assert.ok(Number(spent.headers.get('retry-after')) > 60);
  assert.match((await spent.json()).detail, /cannot succeed in this window/);
  // With its default retries the SDK gives up at once instead of sleeping until the window ends.
  await assert.rejects(
    openaiFor('gpt-busy', 2).chat.completions.create({
      model: 'gpt-busy',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 30,
    }),
    (e: any) => e.status === 429,
  );
});

const Weather = z.object({ city: z.string() });

test('AI SDK generateObject through an Anthropic-backed endpoint gets a structured answer', async () => {
  const provider = createOpenAI({ apiKey: w.server.adminKey, baseURL: `${runUrl(w.server, 'claude')}/v1` });
  const { object } = await generateObject({
    model: provider.chat('claude'),
    schema: Weather,
    prompt: 'Weather?',
  });
  assert.deepEqual(object, { city: 'Paris' });
  const sent = w.fake.requests.at(-1)!.body;
  assert.equal(sent.tool_choice?.type, 'tool', 'the schema is asked of Anthropic as a forced tool');
});

test('LangChain ChatOpenAI.withStructuredOutput through an Anthropic-backed endpoint', async () => {
  const chat = new ChatOpenAI({
    model: 'claude',
    apiKey: w.server.adminKey,
    configuration: { baseURL: `${runUrl(w.server, 'claude')}/v1` },
    maxRetries: 0,
  });
  const out = await chat.withStructuredOutput(Weather, { method: 'jsonSchema' }).invoke('Weather?');
  assert.deepEqual(out, { city: 'Paris' });
});

test('OpenAI JSON mode through an Anthropic-backed endpoint, streamed: the content is the JSON', async () => {
  const stream = await openaiFor('claude').chat.completions.create({
    model: 'claude',
    messages: [{ role: 'user', content: 'Weather?' }],
    response_format: { type: 'json_object' },
    stream: true,
  });
  let text = '';
  let finish: string | null = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.deepEqual(JSON.parse(text), { city: 'Paris' });
  assert.equal(finish, 'stop');
});

test('AI SDK default openai(model) (the Responses API) on an Anthropic-backed endpoint, whole and streamed', async () => {
  const provider = createOpenAI({ apiKey: w.server.adminKey, baseURL: `${runUrl(w.server, 'claude')}/v1` });
  const whole = await generateText({ model: provider('claude'), prompt: 'Hi', maxOutputTokens: 3 });
  assert.equal(whole.text, 'Hello from the');
  assert.equal(whole.usage.outputTokens, 3);
  assert.equal(w.fake.requests.at(-1)!.path, '/v1/messages', 'translated to Anthropic’s Messages API');
  const streamed = streamText({ model: provider('claude'), prompt: 'Hi', maxOutputTokens: 4 });
  let text = '';
  for await (const part of streamed.textStream) text += part;
  assert.equal(text, 'Hello from the fake');
  assert.equal((await streamed.usage).outputTokens, 4);
  const object = await generateObject({ model: provider('claude'), schema: Weather, prompt: 'Weather?' });
  assert.deepEqual(object.object, { city: 'Paris' });
});

test('openai SDK responses.create on an Anthropic-backed endpoint: text and a function call', async () => {
  const client = openaiFor('claude');
  const r = await client.responses.create({ model: 'claude', input: 'Hi', max_output_tokens: 2 });
  assert.equal(r.output_text, 'Hello from');
  const withTool = await client.responses.create({
    model: 'claude',
    input: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [
      {
        type: 'function',
        name: 'weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } } },
        strict: false,
      },
    ],
  });
  const call = withTool.output.find((o) => o.type === 'function_call');
  assert.ok(call && call.type === 'function_call');
  assert.equal(call.name, 'weather');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
});

test('@ai-sdk/anthropic, base URL with /v1 or without, shows Berth’s own message for a policy refusal', async () => {
  for (const baseURL of [`${runUrl(w.server, 'claude-tight')}/v1`, runUrl(w.server, 'claude-tight')]) {
    const provider = createAnthropic({ apiKey: w.server.adminKey, baseURL });
    await assert.rejects(
      generateText({ model: provider('claude-tight'), prompt: 'Hi', maxOutputTokens: 50, maxRetries: 0 }),
      (e: any) => /policy tight allows 10/.test(e.message ?? ''),
    );
  }
  const provider = createAnthropic({ apiKey: w.server.adminKey, baseURL: runUrl(w.server, 'claude') });
  const { text } = await generateText({ model: provider('claude'), prompt: 'Hi', maxOutputTokens: 3 });
  assert.equal(text, 'Hello from the');
});

test('a provider’s 529 overloaded_error stays one on Anthropic routes and is a 503 for OpenAI clients', async () => {
  const anthropic = new Anthropic({
    apiKey: w.server.adminKey,
    baseURL: runUrl(w.server, 'claude'),
    maxRetries: 0,
  });
  await assert.rejects(
    anthropic.messages.create({
      model: 'claude',
      max_tokens: 5,
      messages: [{ role: 'user', content: '[status 529]' }],
    }),
    (e: any) => e.status === 529 && e.error?.error?.type === 'overloaded_error',
  );
  await assert.rejects(
    openaiFor('claude').chat.completions.create({
      model: 'claude',
      messages: [{ role: 'user', content: '[status 529]' }],
    }),
    (e: any) => e.status === 503 && /overloaded/.test(e.message),
  );
});
