import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatToResponse } from './responses-answer.js';
import { responsesToChat } from './responses-request.js';

test('a Responses request becomes a chat request: instructions, turns, tool calls and results, JSON format', () => {
  const chat = responsesToChat({
    model: 'claude',
    instructions: 'Be brief.',
    input: [
      { role: 'user', content: [{ type: 'input_text', text: 'Weather?' }] },
      { type: 'function_call', call_id: 'c1', name: 'weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'c1', output: 'sunny' },
    ],
    tools: [{ type: 'function', name: 'weather', parameters: { type: 'object' } }],
    tool_choice: { type: 'function', name: 'weather' },
    text: { format: { type: 'json_schema', name: 'w', schema: { type: 'object' } } },
    max_output_tokens: 20,
  });
  assert.deepEqual(chat.messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Weather?' }] },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
  ]);
  assert.equal(chat.max_tokens, 20);
  assert.deepEqual(chat.tool_choice, { type: 'function', function: { name: 'weather' } });
  assert.equal(chat.response_format.type, 'json_schema');
  assert.deepEqual(chat.response_format.json_schema.schema, { type: 'object' });
});

test('a chat answer becomes a Response: text, function calls, usage; a length stop is incomplete', () => {
  const r = chatToResponse(
    {
      id: 'x',
      model: 'm',
      choices: [
        {
          message: { content: 'Hi', tool_calls: [{ id: 'c1', function: { name: 'f', arguments: '{}' } }] },
          finish_reason: 'length',
        },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 2 },
    },
    1,
  );
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(
    r.output.map((o: any) => o.type),
    ['message', 'function_call'],
  );
  assert.equal(r.output[0].content[0].text, 'Hi');
  assert.equal(r.output[1].call_id, 'c1');
  assert.equal(r.usage.total_tokens, 5);
});
