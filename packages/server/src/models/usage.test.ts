import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mergeUsage, normalizeUsage, usageIn, usageInJsonText } from './usage.js';

test('every provider’s usage shape reduces to input and output', () => {
  assert.deepEqual(normalizeUsage({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }), {
    input: 10,
    output: 5,
  });
  assert.deepEqual(
    normalizeUsage({
      input_tokens: 10,
      output_tokens: 5,
      cache_read_input_tokens: 100,
      cache_creation_input_tokens: 7,
    }),
    {
      input: 117,
      output: 5,
    },
  );
  assert.deepEqual(normalizeUsage({ promptTokenCount: 3, candidatesTokenCount: 4, thoughtsTokenCount: 2 }), {
    input: 3,
    output: 6,
  });
  assert.deepEqual(normalizeUsage({ billed_units: { input_tokens: 1, output_tokens: 2 } }), {
    input: 1,
    output: 2,
  });
  assert.deepEqual(
    normalizeUsage({ prompt_tokens: 8, total_tokens: 8 }),
    { input: 8, output: 0 },
    'embeddings',
  );
  assert.equal(normalizeUsage(null), undefined);
  assert.deepEqual(
    usageIn({ type: 'response.completed', response: { usage: { input_tokens: 1, output_tokens: 2 } } }),
    { input: 1, output: 2 },
  );
  assert.deepEqual(usageIn({ x_groq: { usage: { prompt_tokens: 1, completion_tokens: 2 } } }), {
    input: 1,
    output: 2,
  });
});

test('streams that repeat or grow counts keep the largest', () => {
  let u = mergeUsage({}, { input: 20, output: 1 });
  u = mergeUsage(u, { output: 30 });
  assert.deepEqual(u, { input: 20, output: 30 });
});

test('usage is found in a large JSON answer without parsing all of it, nested objects included', () => {
  const big = JSON.stringify({
    data: Array.from({ length: 2000 }, (_, i) => ({ embedding: [i, i + 0.5], note: 'no "usage" here {' })),
    usage: {
      prompt_tokens: 42,
      completion_tokens: 0,
      total_tokens: 42,
      prompt_tokens_details: { cached_tokens: 0 },
    },
  });
  assert.deepEqual(usageInJsonText(big), { input: 42, output: 0 });
  assert.deepEqual(usageInJsonText('{"usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2}}'), {
    input: 1,
    output: 2,
  });
  assert.equal(usageInJsonText('{"usage": null}'), undefined);
});
