import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  DEFAULT_MAX_OUTPUT,
  defaultMaxOutput,
  estimateInputTokens,
  requestedMaxOutput,
  TOKENS_PER_MEDIA,
} from './estimate.js';

test('the output ceiling is what the request asks, in any provider’s field', () => {
  assert.equal(requestedMaxOutput({ max_tokens: 10 }), 10);
  assert.equal(requestedMaxOutput({ max_completion_tokens: 7, max_tokens: 10 }), 7);
  assert.equal(requestedMaxOutput({ max_output_tokens: 3 }), 3);
  assert.equal(requestedMaxOutput({ generationConfig: { maxOutputTokens: 9 } }), 9);
  assert.equal(requestedMaxOutput({ max_tokens: -1 }), undefined);
});

test('otherwise the model’s default maximum, by longest known prefix, else 4096', () => {
  assert.equal(defaultMaxOutput('gpt-4o-mini-2024-07-18'), 16_384);
  assert.equal(defaultMaxOutput('claude-3-5-haiku-latest'), 8_192);
  assert.equal(defaultMaxOutput('claude-sonnet-4-20250514'), 64_000);
  assert.equal(defaultMaxOutput('models/gemini-2.5-pro'), 65_536);
  assert.equal(defaultMaxOutput('llama3'), DEFAULT_MAX_OUTPUT);
  assert.equal(defaultMaxOutput(undefined), DEFAULT_MAX_OUTPUT);
});

test('input is counted with a real tokenizer; images count a flat amount, not their base64', () => {
  // "Hello, world! How are you doing today?" is 10 tokens in o200k_base.
  const text = 'Hello, world! How are you doing today?';
  const n = estimateInputTokens({ model: 'gpt-4o', messages: [{ role: 'user', content: text }] });
  assert.equal(n, 10 + 4);
  const image = `data:image/png;base64,${'A'.repeat(1_000_000)}`;
  const withImage = estimateInputTokens({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text },
          { type: 'image_url', image_url: { url: image } },
        ],
      },
    ],
  });
  assert.equal(withImage, 10 + 4 + TOKENS_PER_MEDIA);
});
