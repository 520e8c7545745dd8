// Cohere: native v2 API passes through; OpenAI-style calls use Cohere's compatibility API.
import { type Connection, joinUrl, type Provider } from './types.js';

const COMPAT = '/compatibility/v1';

export const cohere: Provider = {
  type: 'cohere',
  wire: 'cohere',
  defaultBaseUrl: 'https://api.cohere.com',
  credentialHeaders: (c: Connection): Record<string, string> =>
    c.apiKey ? { authorization: `Bearer ${c.apiKey}` } : {},
  url(c, path, query) {
    const p = path.startsWith('/v1/') ? `${COMPAT}${path.slice(3)}` : path;
    return joinUrl(c.baseUrl, p, query);
  },
  chat: { mode: 'native', path: `${COMPAT}/chat/completions` },
  modelsPath: '/v1/models',
};
