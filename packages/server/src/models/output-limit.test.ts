import assert from 'node:assert/strict';
import { test } from 'node:test';
import { outputLimitOf, withOutputLimit } from './output-limit.js';
import { providerFor } from './providers/index.js';

const CHAT = '/v1/chat/completions';
const GEMINI = '/v1beta/models/gemini-2.5-flash:generateContent';

test('the limit a request sets is read from every field its API may honour, the largest winning', () => {
  assert.deepEqual(outputLimitOf('POST', CHAT, { max_tokens: 10 }), {
    requested: 10,
    choices: 1,
    settable: true,
  });
  assert.equal(outputLimitOf('POST', CHAT, { max_completion_tokens: 7, max_tokens: 10 }).requested, 10);
  assert.equal(outputLimitOf('POST', CHAT, { max_tokens: '300' }).requested, 300, 'Python servers coerce');
  assert.equal(outputLimitOf('POST', '/v1/responses', { max_output_tokens: 3 }).requested, 3);
  assert.equal(outputLimitOf('POST', '/v1/messages', { max_tokens: 9 }).requested, 9);
  assert.equal(outputLimitOf('POST', GEMINI, { generationConfig: { maxOutputTokens: 9 } }).requested, 9);
  assert.equal(outputLimitOf('POST', GEMINI, { generation_config: { max_output_tokens: 12 } }).requested, 12);
  assert.equal(outputLimitOf('POST', CHAT, { max_tokens: -1 }).requested, undefined);
  assert.equal(outputLimitOf('POST', CHAT, { max_tokens: null }).requested, undefined);
});

test('a limit in a field the API does not read is no limit: chat ignores max_output_tokens', () => {
  assert.equal(outputLimitOf('POST', CHAT, { max_output_tokens: 5 }).requested, undefined);
  assert.equal(outputLimitOf('POST', '/v1/responses', { max_tokens: 5 }).requested, undefined);
});

test('answers asked at once multiply the output: n, best_of, candidateCount', () => {
  assert.equal(outputLimitOf('POST', CHAT, { n: 3 }).choices, 3);
  assert.equal(outputLimitOf('POST', '/v1/completions', { n: 2, best_of: 5 }).choices, 5);
  assert.equal(outputLimitOf('POST', GEMINI, { generationConfig: { candidateCount: 4 } }).choices, 4);
  assert.equal(outputLimitOf('POST', CHAT, { n: 0 }).choices, 1);
});

test('paths whose output Berth cannot bound, and bodies it cannot read, are not settable', () => {
  assert.equal(outputLimitOf('POST', '/v1/images/generations', { prompt: 'x' }).settable, false);
  assert.equal(outputLimitOf('GET', CHAT, undefined).settable, false);
  assert.equal(outputLimitOf('POST', CHAT, undefined).settable, false);
});

/** withOutputLimit through a connection of provider `type` (config: e.g. Azure's apiVersion). */
const write = (
  path: string,
  body: Record<string, any>,
  type: string,
  limit: number,
  config: Record<string, unknown> = {},
) =>
  withOutputLimit(
    'POST',
    path,
    body,
    providerFor(type)!,
    {
      name: 'c',
      integration: type,
      baseUrl: 'http://p',
      config,
      secretValues: [],
    },
    limit,
  );

test('the limit is written in the field the provider honours, other spellings removed', () => {
  assert.deepEqual(write(CHAT, { messages: [] }, 'openai', 100), {
    messages: [],
    max_completion_tokens: 100,
  });
  assert.deepEqual(write(CHAT, { messages: [] }, 'mistral', 100), { messages: [], max_tokens: 100 });
  assert.deepEqual(write(CHAT, { max_completion_tokens: 50 }, 'mistral', 50), { max_tokens: 50 });
  assert.deepEqual(write(CHAT, { max_tokens: 10, max_completion_tokens: 50 }, 'openai', 50), {
    max_completion_tokens: 50,
  });
  assert.deepEqual(write(GEMINI, { generation_config: { max_output_tokens: 9, topK: 2 } }, 'gemini', 9), {
    generation_config: { topK: 2, maxOutputTokens: 9 },
  });
  assert.deepEqual(write(GEMINI, { contents: [] }, 'gemini', 7), {
    contents: [],
    generationConfig: { maxOutputTokens: 7 },
  });
});

test('Azure: max_completion_tokens only for API versions that read it', () => {
  assert.deepEqual(
    write(CHAT, {}, 'azure-openai', 8),
    { max_tokens: 8 },
    'the default GA version, 2024-10-21',
  );
  assert.deepEqual(write(CHAT, {}, 'azure-openai', 8, { apiVersion: '2024-12-01-preview' }), {
    max_completion_tokens: 8,
  });
  assert.deepEqual(
    write(CHAT, { max_completion_tokens: 8 }, 'azure-openai', 8, { apiVersion: '2024-06-01' }),
    {
      max_tokens: 8,
    },
  );
  assert.equal(write(CHAT, { max_tokens: 8 }, 'azure-openai', 8, { apiVersion: 'preview' }), undefined);
});

test('a body that already says exactly the limit in an honoured field is left as it came', () => {
  assert.equal(write(CHAT, { max_tokens: 50 }, 'openai', 50), undefined);
  assert.equal(write('/v1/messages', { max_tokens: 50 }, 'anthropic', 50), undefined);
});
