// Anthropic: Messages API with `x-api-key` and `anthropic-version`; OpenAI-style chat is translated.
import { type Connection, joinUrl, type Provider } from './types.js';

/** The API version sent when neither the caller nor the connection (`config.apiVersion`) names one. */
export const ANTHROPIC_VERSION = '2023-06-01';

export const anthropic: Provider = {
  type: 'anthropic',
  wire: 'anthropic',
  defaultBaseUrl: 'https://api.anthropic.com',
  credentialHeaders(c: Connection) {
    const h: Record<string, string> = {
      'anthropic-version': typeof c.config.apiVersion === 'string' ? c.config.apiVersion : ANTHROPIC_VERSION,
    };
    if (c.apiKey) h['x-api-key'] = c.apiKey;
    return h;
  },
  url: (c, path, query) => joinUrl(c.baseUrl, path, query),
  chat: { mode: 'anthropic' },
  modelsPath: '/v1/models',
};
