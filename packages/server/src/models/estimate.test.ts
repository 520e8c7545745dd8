import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import {
  countInputTokens,
  DEFAULT_MAX_OUTPUT,
  OTHER_FAMILY_INPUT_MARGIN,
  defaultMaxOutput,
  inputBytesBound,
  TOKENS_PER_MEDIA,
} from './estimate.js';
import { tokenCounter } from './token-counter.js';

after(() => tokenCounter.stop());

/** A workspace per test: counts are cached per workspace, and each test here wants its texts counted afresh. */
let workspaces = 0;
const estimateInputTokens = (body: unknown, model?: string) =>
  countInputTokens(body, model, `estimate-test-${++workspaces}`);

test('a model’s default maximum output, by longest known prefix, else 4096', () => {
  assert.equal(defaultMaxOutput('gpt-4o-mini-2024-07-18'), 16_384);
  assert.equal(defaultMaxOutput('claude-3-5-haiku-latest'), 8_192);
  assert.equal(defaultMaxOutput('claude-sonnet-4-20250514'), 64_000);
  assert.equal(defaultMaxOutput('models/gemini-2.5-pro'), 65_536);
  assert.equal(defaultMaxOutput('llama3'), DEFAULT_MAX_OUTPUT);
  assert.equal(defaultMaxOutput(undefined), DEFAULT_MAX_OUTPUT);
});

test('input is counted with a real tokenizer; images count a flat amount, not their base64', async () => {
  // "Hello, world! How are you doing today?" is 10 tokens in o200k_base.
  const text = 'Hello, world! How are you doing today?';
  const n = await estimateInputTokens({ model: 'gpt-4o', messages: [{ role: 'user', content: text }] });
  assert.equal(n, 10 + 4 + 3, 'text, one message’s framing, the reply’s priming');
  const image = `data:image/png;base64,${'A'.repeat(1_000_000)}`;
  const withImage = await estimateInputTokens({
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

test('models outside OpenAI’s family get a margin on their input estimate', async () => {
  const body = { messages: [{ role: 'user', content: 'Hello, world! How are you doing today?' }] };
  assert.equal(
    await estimateInputTokens(body, 'claude-sonnet-4-5'),
    Math.ceil(17 * OTHER_FAMILY_INPUT_MARGIN),
  );
  assert.equal(await estimateInputTokens(body, 'gpt-4o'), 17);
});

test('a prompt holding a special token’s text is counted as ordinary text, not refused by the tokenizer', async () => {
  // gpt-tokenizer throws on `<|endoftext|>` by default; a user may well write it (a question about tokenizers),
  // and providers read it in user content as plain text: 15 tokens in o200k_base, as tiktoken's encode_ordinary.
  const text = '<|endoftext|> and <|endofprompt|>';
  const n = await estimateInputTokens({ model: 'gpt-4o', messages: [{ role: 'user', content: text }] });
  assert.equal(n, 15 + 4 + 3);
});

test('texts counted before in a workspace are answered at once; another workspace’s counts are not used', async () => {
  const body = {
    messages: [
      { role: 'system', content: 'You answer in one sentence.' },
      { role: 'user', content: 'How many tokens is this?' },
    ],
  };
  const first = countInputTokens(body, 'gpt-4o', 'cache-a');
  assert.ok(first instanceof Promise, 'new texts go to the tokenizer’s thread');
  const n = await first;
  assert.equal(countInputTokens(body, 'gpt-4o', 'cache-a'), n, 'a number, not a promise: no round trip');
  const other = countInputTokens(body, 'gpt-4o', 'cache-b');
  assert.ok(
    other instanceof Promise,
    'workspace cache-b has not sent these texts: no answer from cache-a’s cache',
  );
  assert.equal(await other, n);
});

test('the upper bound used when the tokenizer cannot answer after a call is the texts’ UTF-8 size', () => {
  const body = { messages: [{ role: 'user', content: 'héllo 👋' }] };
  assert.equal(inputBytesBound(body), Buffer.byteLength('héllo 👋') + 4 + 3);
});
