import assert from 'node:assert/strict';
import { test } from 'node:test';
import { providerFor } from './index.js';
import { type Connection, joinUrl } from './types.js';

const conn = (baseUrl: string, config: Record<string, unknown> = {}): Connection => ({
  name: 'c',
  integration: 'x',
  baseUrl,
  config,
  apiKey: 'k',
  secretValues: ['k'],
});

test('a base URL that already ends in /v1 does not get a second one', () => {
  assert.equal(joinUrl('http://h:1/v1', '/v1/chat/completions'), 'http://h:1/v1/chat/completions');
  assert.equal(joinUrl('http://h:1/', '/v1/models', 'a=1'), 'http://h:1/v1/models?a=1');
  assert.equal(
    joinUrl('https://api.groq.com/openai', '/v1/chat/completions'),
    'https://api.groq.com/openai/v1/chat/completions',
  );
});

test('each provider sends its credential its own way', () => {
  assert.deepEqual(providerFor('openai')!.credentialHeaders(conn('u', { organization: 'org-1' })), {
    authorization: 'Bearer k',
    'openai-organization': 'org-1',
  });
  assert.deepEqual(providerFor('anthropic')!.credentialHeaders(conn('u')), {
    'anthropic-version': '2023-06-01',
    'x-api-key': 'k',
  });
  assert.deepEqual(providerFor('azure-openai')!.credentialHeaders(conn('u')), { 'api-key': 'k' });
  assert.equal(providerFor('gemini')!.credentialHeaders(conn('u'))['x-goog-api-key'], 'k');
  assert.equal(providerFor('http-api'), undefined);
});

test('Azure maps OpenAI paths onto the deployment; Gemini and Cohere onto their compatibility layers', () => {
  const az = providerFor('azure-openai')!;
  assert.equal(
    az.url(conn('https://r.openai.azure.com'), '/v1/chat/completions', '', 'gpt4o-prod'),
    'https://r.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21',
  );
  const gem = providerFor('gemini')!;
  assert.equal(gem.url(conn('https://g'), '/v1/embeddings', ''), 'https://g/v1beta/openai/embeddings');
  assert.equal(
    gem.url(conn('https://g'), '/v1beta/models/gemini-2.5-pro:generateContent', ''),
    'https://g/v1beta/models/gemini-2.5-pro:generateContent',
  );
  assert.deepEqual(gem.chat, { mode: 'native', path: '/v1beta/openai/chat/completions' });
  assert.equal(
    providerFor('cohere')!.url(conn('https://c'), '/v1/chat/completions', ''),
    'https://c/compatibility/v1/chat/completions',
  );
});
