// Providers that speak OpenAI's API natively: OpenAI itself, and the vendors whose public API is
// OpenAI-compatible at their own address (Mistral, xAI, DeepSeek, Groq, any self-hosted server).
import { type Connection, joinUrl, type Provider } from './types.js';

function openAiLike(
  type: string,
  defaultBaseUrl: string | undefined,
  extra: Partial<Provider> = {},
): Provider {
  return {
    type,
    wire: 'openai',
    defaultBaseUrl,
    credentialHeaders(c: Connection, organization?: string) {
      const h: Record<string, string> = {};
      if (c.apiKey) h.authorization = `Bearer ${c.apiKey}`;
      const org =
        organization ?? (typeof c.config.organization === 'string' ? c.config.organization : undefined);
      if (org && type === 'openai') h['openai-organization'] = org;
      if (typeof c.config.project === 'string' && type === 'openai') h['openai-project'] = c.config.project;
      return h;
    },
    url: (c, path, query) => joinUrl(c.baseUrl, path, query),
    chat: { mode: 'native' },
    askStreamUsage: true,
    modelsPath: '/v1/models',
    ...extra,
  };
}

/** OpenAI's reasoning models refuse `max_tokens`; `max_completion_tokens` bounds every model's output. */
export const OPENAI_CHAT_LIMIT_FIELDS = ['max_completion_tokens', 'max_tokens'];

export const openai = openAiLike('openai', 'https://api.openai.com', {
  chatLimitFields: () => OPENAI_CHAT_LIMIT_FIELDS,
});
// Mistral reports usage in its last stream chunk unasked, and rejects unknown request fields.
export const mistral = openAiLike('mistral', 'https://api.mistral.ai', { askStreamUsage: false });
export const xai = openAiLike('xai', 'https://api.x.ai');
export const deepseek = openAiLike('deepseek', 'https://api.deepseek.com');
// Groq serves OpenAI's paths under /openai.
export const groq = openAiLike('groq', 'https://api.groq.com/openai');
export const openaiCompatible = openAiLike('openai-compatible', undefined, { keyOptional: true });
