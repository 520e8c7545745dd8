import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import {
  COUNT_SLICE_CHARS,
  countInputTokens,
  DEFAULT_MAX_OUTPUT,
  OTHER_FAMILY_INPUT_MARGIN,
  defaultMaxOutput,
  estimateInputTokens,
  TOKENS_PER_MEDIA,
} from './estimate.js';

test('a model’s default maximum output, by longest known prefix, else 4096', () => {
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
  assert.equal(n, 10 + 4 + 3, 'text, one message’s framing, the reply’s priming');
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
  assert.equal(withImage, 10 + 4 + 3 + TOKENS_PER_MEDIA);
});

const longPrompt = (chars: number) => {
  const sentence = 'The gateway counts every prompt before a provider sees it, 42 times over. ';
  return sentence.repeat(Math.ceil(chars / sentence.length)).slice(0, chars);
};

test('a long prompt counted in slices matches the whole count within one token per slice', async () => {
  const body = { model: 'gpt-4o', messages: [{ role: 'user', content: longPrompt(1_000_000) }] };
  const whole = estimateInputTokens(body, 'gpt-4o');
  const sliced = await countInputTokens(body, 'gpt-4o');
  const slices = Math.ceil(1_000_000 / COUNT_SLICE_CHARS);
  assert.ok(Math.abs(whole - sliced) <= slices, `whole ${whole}, sliced ${sliced}`);
});

test('counting a 10 MB prompt lets other work run between slices', async () => {
  const body = { messages: [{ role: 'user', content: longPrompt(10 * 1024 * 1024) }] };
  let ticks = 0;
  let counting = true;
  const other = (async () => {
    while (counting) {
      ticks++;
      await tick();
    }
  })();
  await countInputTokens(body);
  counting = false;
  await other;
  assert.ok(ticks >= (10 * 1024 * 1024) / COUNT_SLICE_CHARS / 2, `other work ran ${ticks} times`);
});

test('models outside OpenAI’s family get a margin on their input estimate', () => {
  const body = { messages: [{ role: 'user', content: 'Hello, world! How are you doing today?' }] };
  assert.equal(estimateInputTokens(body, 'claude-sonnet-4-5'), Math.ceil(17 * OTHER_FAMILY_INPUT_MARGIN));
  assert.equal(estimateInputTokens(body, 'gpt-4o'), 17);
});

test('a prompt holding a special token’s text is counted as ordinary text, not refused by the tokenizer', () => {
  // gpt-tokenizer throws on `<|endoftext|>` by default; a user may well write it (a question about tokenizers),
  // and providers read it in user content as plain text: 15 tokens in o200k_base, as tiktoken's encode_ordinary.
  const text = '<|endoftext|> and <|endofprompt|>';
  const n = estimateInputTokens({ model: 'gpt-4o', messages: [{ role: 'user', content: text }] });
  assert.equal(n, 15 + 4 + 3);
});
