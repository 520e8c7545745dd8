import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import fc from 'fast-check';
import { sseFrame } from '../stream/sse.js';
import { AnthropicToChatStream, messageToChat } from './anthropic-to-openai.js';
import { chatToMessages } from './openai-to-anthropic.js';

test('requests: system lifted, consecutive tool results merged into one user turn, images and tool choice mapped', () => {
  const out = chatToMessages(
    {
      messages: [
        { role: 'system', content: 'S1' },
        { role: 'developer', content: [{ type: 'text', text: 'S2' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 't1', type: 'function', function: { name: 'a', arguments: '{"x":1}' } },
            { id: 't2', type: 'function', function: { name: 'b', arguments: '' } },
          ],
        },
        { role: 'tool', tool_call_id: 't1', content: 'r1' },
        { role: 'tool', tool_call_id: 't2', content: [{ type: 'text', text: 'r2' }] },
        { role: 'user', content: 'and?' },
      ],
      tools: [{ type: 'function', function: { name: 'a', parameters: { type: 'object' } } }],
      tool_choice: { type: 'function', function: { name: 'a' } },
      parallel_tool_calls: false,
      temperature: 1.5,
      stop: 'END',
      user: 'u1',
      stream: true,
    },
    'claude-x',
    100,
  );
  assert.deepEqual(out, {
    model: 'claude-x',
    max_tokens: 100,
    system: 'S1\n\nS2',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 't1', name: 'a', input: { x: 1 } },
          { type: 'tool_use', id: 't2', name: 'b', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'r1' },
          { type: 'tool_result', tool_use_id: 't2', content: 'r2' },
          { type: 'text', text: 'and?' },
        ],
      },
    ],
    temperature: 1,
    stop_sequences: ['END'],
    stream: true,
    tools: [{ name: 'a', input_schema: { type: 'object' } }],
    tool_choice: { type: 'tool', name: 'a', disable_parallel_tool_use: true },
    metadata: { user_id: 'u1' },
  });
});

test('answers: text and tool use become one choice with tool_calls and a mapped finish reason', () => {
  const chat = messageToChat(
    {
      id: 'msg_1',
      model: 'm',
      content: [
        { type: 'text', text: 'ok ' },
        { type: 'tool_use', id: 'tu', name: 'f', input: { a: 1 } },
      ],
      stop_reason: 'tool_use',
      usage: { input_tokens: 3, output_tokens: 4 },
    },
    1,
  ) as any;
  assert.equal(chat.choices[0].message.content, 'ok ');
  assert.deepEqual(chat.choices[0].message.tool_calls, [
    { id: 'tu', type: 'function', function: { name: 'f', arguments: '{"a":1}' } },
  ]);
  assert.equal(chat.choices[0].finish_reason, 'tool_calls');
  assert.deepEqual(chat.usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
});

const ANTHROPIC_STREAM = [
  sseFrame(
    JSON.stringify({
      type: 'message_start',
      message: { id: 'msg_1', model: 'm', usage: { input_tokens: 9, output_tokens: 1 } },
    }),
    'message_start',
  ),
  sseFrame(JSON.stringify({ type: 'ping' }), 'ping'),
  sseFrame(
    JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    'content_block_start',
  ),
  sseFrame(
    JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hé' } }),
    'content_block_delta',
  ),
  sseFrame(JSON.stringify({ type: 'content_block_stop', index: 0 }), 'content_block_stop'),
  sseFrame(
    JSON.stringify({
      type: 'content_block_start',
      index: 1,
      content_block: { type: 'tool_use', id: 'tu', name: 'f', input: {} },
    }),
    'content_block_start',
  ),
  sseFrame(
    JSON.stringify({
      type: 'content_block_delta',
      index: 1,
      delta: { type: 'input_json_delta', partial_json: '{"a"' },
    }),
    'content_block_delta',
  ),
  sseFrame(
    JSON.stringify({
      type: 'content_block_delta',
      index: 1,
      delta: { type: 'input_json_delta', partial_json: ':1}' },
    }),
    'content_block_delta',
  ),
  sseFrame(
    JSON.stringify({
      type: 'message_delta',
      delta: { stop_reason: 'tool_use' },
      usage: { output_tokens: 12 },
    }),
    'message_delta',
  ),
  sseFrame(JSON.stringify({ type: 'message_stop' }), 'message_stop'),
].join('');

async function translate(chunks: Buffer[], includeUsage: boolean) {
  const t = new AnthropicToChatStream(includeUsage, 1);
  let out = '';
  for await (const c of Readable.from(chunks).pipe(t)) out += c.toString();
  return { out, usage: t.usage };
}

test('streams: text deltas, tool call fragments, finish reason, usage chunk and [DONE], whatever the chunking', async () => {
  const bytes = Buffer.from(ANTHROPIC_STREAM);
  const whole = await translate([bytes], true);
  const events = whole.out
    .split('\n\n')
    .filter(Boolean)
    .map((e) => e.replace(/^data: /, ''));
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  assert.deepEqual(chunks[1].choices[0].delta, { content: 'Hé' });
  assert.deepEqual(chunks[2].choices[0].delta.tool_calls, [
    { index: 0, id: 'tu', type: 'function', function: { name: 'f', arguments: '' } },
  ]);
  assert.equal(
    chunks[3].choices[0].delta.tool_calls[0].function.arguments +
      chunks[4].choices[0].delta.tool_calls[0].function.arguments,
    '{"a":1}',
  );
  assert.equal(chunks[5].choices[0].finish_reason, 'tool_calls');
  assert.deepEqual(chunks[6].choices, []);
  assert.deepEqual(chunks[6].usage, { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21 });
  assert.deepEqual(whole.usage, { input: 9, output: 12 });
  assert.ok(chunks.every((c) => c.id === 'msg_1' && c.object === 'chat.completion.chunk'));

  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 10 }),
      async (cuts) => {
        const parts: Buffer[] = [];
        let at = 0;
        for (const c of [...cuts.sort((a, b) => a - b), bytes.length]) {
          parts.push(bytes.subarray(at, c));
          at = c;
        }
        assert.equal((await translate(parts, true)).out, whole.out);
      },
    ),
    { numRuns: 50 },
  );
});

test('streams: no usage chunk unless asked; a provider error event becomes an OpenAI error event', async () => {
  const { out } = await translate([Buffer.from(ANTHROPIC_STREAM)], false);
  assert.ok(!out.includes('"usage"'));
  const err = await translate(
    [
      Buffer.from(
        sseFrame(
          JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }),
          'error',
        ),
      ),
    ],
    false,
  );
  assert.deepEqual(JSON.parse(err.out.replace(/^data: /, '')), {
    error: { message: 'Overloaded', type: 'overloaded_error' },
  });
});
