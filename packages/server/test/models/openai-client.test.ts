// The real `openai` npm client, with a Berth API key, against an OpenAI-type model endpoint.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { connection, eventually, model, ok, PROVIDER_KEY, runUrl, startWorld, type World } from './setup.js';

let w: World;
let client: OpenAI;

before(async () => {
  w = await startWorld();
  await connection(w.server, 'oa', 'openai', w.fake.url);
  await model(w.server, 'gpt', {
    integrationConnections: ['oa'],
    runtime: { type: 'openai', model: 'fake-gpt' },
  });
  client = new OpenAI({ apiKey: w.server.adminKey, baseURL: `${runUrl(w.server, 'gpt')}/v1`, maxRetries: 0 });
});
after(() => w.close());

const lastRequest = () => w.fake.requests.at(-1)!;

test('chat: the provider gets its own key and the pinned model, the caller gets the answer', async () => {
  const r = await client.chat.completions.create({
    model: 'gpt',
    messages: [{ role: 'user', content: 'Hi' }],
  });
  assert.equal(r.choices[0].message.content, 'Hello from the fake provider');
  assert.equal(r.usage?.completion_tokens, 5);
  const seen = lastRequest();
  assert.equal(seen.headers.authorization, `Bearer ${PROVIDER_KEY}`);
  assert.equal(seen.body.model, 'fake-gpt', 'the endpoint name is replaced by runtime.model');
  assert.ok(
    !JSON.stringify(seen.headers).includes(w.server.adminKey),
    'the Berth key never reaches the provider',
  );
});

test('chat: a model the caller names other than the endpoint’s is refused (decision 039)', async () => {
  const before = w.fake.requests.length;
  await assert.rejects(
    client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
    }),
    (e: any) => e instanceof OpenAI.PermissionDeniedError && /serves fake-gpt only/.test(e.message),
  );
  assert.equal(w.fake.requests.length, before, 'the provider was not asked');
});

test('streaming: tokens arrive as chunks and usage is asked for on the caller’s behalf', async () => {
  const stream = await client.chat.completions.create({
    model: 'gpt',
    messages: [{ role: 'user', content: 'Hi' }],
    stream: true,
  });
  const parts: string[] = [];
  for await (const chunk of stream) parts.push(chunk.choices[0]?.delta?.content ?? '');
  assert.ok(parts.filter(Boolean).length >= 5, 'one chunk per token');
  assert.equal(parts.join(''), 'Hello from the fake provider');
  assert.deepEqual(lastRequest().body.stream_options, { include_usage: true });
});

test('tool calls: declared, called, and answered with the result', async () => {
  const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
    {
      type: 'function',
      function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
    },
  ];
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'user', content: 'Weather in Paris?' },
  ];
  const r = await client.chat.completions.create({ model: 'gpt', messages, tools });
  const call = r.choices[0].message.tool_calls?.[0];
  assert.ok(call && call.type === 'function');
  assert.equal(call.function.name, 'weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  const r2 = await client.chat.completions.create({
    model: 'gpt',
    tools,
    messages: [...messages, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
  });
  assert.equal(r2.choices[0].message.content, 'The tool said: sunny');
});

test('streamed tool calls carry their arguments in fragments', async () => {
  const stream = await client.chat.completions.create({
    model: 'gpt',
    messages: [{ role: 'user', content: 'Weather?' }],
    tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
    stream: true,
  });
  let args = '';
  let name = '';
  for await (const chunk of stream)
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      name += tc.function?.name ?? '';
      args += tc.function?.arguments ?? '';
    }
  assert.equal(name, 'weather');
  assert.deepEqual(JSON.parse(args), { city: 'Paris' });
});

test('embeddings: vectors come back (the client asks for base64 and decodes it)', async () => {
  const r = await client.embeddings.create({ model: 'gpt', input: ['one', 'two'] });
  assert.equal(r.data.length, 2);
  assert.equal(r.data[0].embedding.length, 8);
  assert.ok(r.usage.prompt_tokens > 0);
});

test('responses API passes through', async () => {
  const r = await client.responses.create({ model: 'gpt', input: 'Say hi', max_output_tokens: 3 });
  assert.equal(r.output_text, 'Hello from the');
  assert.equal(lastRequest().path, '/v1/responses');
});

test('errors: the provider’s 400 keeps its message; a bad Berth key is a 401; an unknown endpoint a 404', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: 'gpt',
      messages: [{ role: 'user', content: 'please [status 400]' }],
    }),
    (e: any) =>
      e instanceof OpenAI.BadRequestError && e.status === 400 && /fake error 400 as asked/.test(e.message),
  );
  const bad = new OpenAI({ apiKey: 'bk_not-a-key', baseURL: `${runUrl(w.server, 'gpt')}/v1`, maxRetries: 0 });
  await assert.rejects(
    bad.chat.completions.create({ model: 'gpt', messages: [{ role: 'user', content: 'x' }] }),
    (e: any) => e.status === 401,
  );
  const none = new OpenAI({
    apiKey: w.server.adminKey,
    baseURL: `${runUrl(w.server, 'nope')}/v1`,
    maxRetries: 0,
  });
  await assert.rejects(
    none.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] }),
    (e: any) => e.status === 404,
  );
  const otherWs = new OpenAI({
    apiKey: w.server.adminKey,
    baseURL: `${runUrl(w.server, 'gpt', 'elsewhere')}/v1`,
    maxRetries: 0,
  });
  await assert.rejects(
    otherWs.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] }),
    (e: any) => e.status === 404,
  );
});

test('errors: a provider 500 is a 502 problem; the provider’s 429 stays a 429', async () => {
  w.fake.fail(500);
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt', messages: [{ role: 'user', content: 'x' }] }),
    (e: any) => e.status === 502,
  );
  w.fake.fail(429);
  const res = await fetch(`${runUrl(w.server, 'gpt')}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${w.server.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }),
  });
  assert.equal(res.status, 429);
  assert.match(res.headers.get('content-type') ?? '', /application\/problem\+json/);
  const p = await res.json();
  assert.equal(p.code, 429);
  assert.match(p.detail, /fake failure 429/);
});

test('usage is counted per model and key, from the provider’s own figures', async () => {
  const before = await ok(w.server.api('/models/gpt/usage?groupBy=key'));
  const prior = before.find((r: any) => r.keyId.startsWith('ak-'))?.outputTokens ?? 0;
  await client.chat.completions.create({
    model: 'gpt',
    messages: [{ role: 'user', content: 'count me' }],
    max_tokens: 7,
  });
  const rows = await eventually(
    () => ok(w.server.api('/models/gpt/usage?groupBy=key')),
    (rs: any[]) => rs.some((r) => r.outputTokens >= prior + 7),
    'usage row',
  );
  const row = rows.find((r: any) => r.keyId.startsWith('ak-'));
  assert.ok(row.requests >= 1 && row.inputTokens > 0);
  const hours = await ok(w.server.api('/models/gpt/usage?groupBy=hour&from=1h'));
  assert.ok(hours.length >= 1 && hours.length <= 2, 'one row per hour');
  for (const h of hours) assert.match(h.hour, /^\d{4}-\d{2}-\d{2}T\d{2}:00:00\.000Z$/);
  // The workspace's own series: a member's credential reads them (without one, no series names a workspace).
  const metrics = await (
    await fetch(`${w.server.url}/metrics`, { headers: { authorization: `Bearer ${w.server.adminKey}` } })
  ).text();
  assert.match(
    metrics,
    /berth_model_tokens_total\{workspace="default",model="gpt",key="ak-[0-9a-f]+",direction="output"\} \d+/,
  );
});

test('the service SDK’s headers work; a workspace header cannot redirect the call elsewhere', async () => {
  for (const h of ['x-blaxel-authorization', 'x-service-authorization']) {
    const r = await fetch(`${runUrl(w.server, 'gpt')}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        [h]: `Bearer ${w.server.adminKey}`,
        'x-blaxel-workspace': 'other',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 }),
    });
    assert.equal(r.status, 200, h);
    assert.ok(!(h in lastRequest().headers), 'Berth credential headers are not forwarded');
    assert.ok(!('x-blaxel-workspace' in lastRequest().headers));
  }
  const bare = await fetch(`${runUrl(w.server, 'gpt')}/v1/chat/completions`, { method: 'POST', body: '{}' });
  assert.equal(bare.status, 401);
  const noPath = await fetch(runUrl(w.server, 'gpt'), {
    headers: { authorization: `Bearer ${w.server.adminKey}` },
  });
  assert.equal(noPath.status, 404);
});
