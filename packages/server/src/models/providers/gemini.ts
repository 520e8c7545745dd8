// Google Gemini: its native API (`/v1beta/models/...:generateContent`) passes through; OpenAI-style
// calls go to Google's own OpenAI compatibility layer under /v1beta/openai, which keeps streaming and
// tool calls exact without a translation of Berth's own to maintain.
import { type Connection, joinUrl, type Provider } from './types.js';

const COMPAT = '/v1beta/openai';

export const gemini: Provider = {
  type: 'gemini',
  wire: 'gemini',
  defaultBaseUrl: 'https://generativelanguage.googleapis.com',
  credentialHeaders(c: Connection): Record<string, string> {
    if (!c.apiKey) return {};
    // The native API reads x-goog-api-key; the compatibility layer reads a bearer token.
    return { 'x-goog-api-key': c.apiKey, authorization: `Bearer ${c.apiKey}` };
  },
  url(c, path, query) {
    // OpenAI-style paths (`/v1/embeddings`, `/v1/models`) map onto the compatibility layer.
    const p = path.startsWith('/v1/') ? `${COMPAT}${path.slice(3)}` : path;
    return joinUrl(c.baseUrl, p, query);
  },
  chat: { mode: 'native', path: `${COMPAT}/chat/completions` },
  askStreamUsage: true,
  modelsPath: '/v1beta/models',
};
