// Azure OpenAI: OpenAI's wire format at `{resource}/openai/deployments/{deployment}/...?api-version=`,
// credential in `api-key`. The deployment is the model the request names (or the endpoint's model).
import { OPENAI_CHAT_LIMIT_FIELDS } from './openai.js';
import { type Connection, joinUrl, type Provider } from './types.js';

/** A GA data-plane version; `config.apiVersion` overrides it. */
export const AZURE_API_VERSION = '2024-10-21';

/**
 * Whether an API version reads `max_completion_tokens`: previews from 2024-09-01 on, and GA versions after
 * 2024-10-21, whose specification has only `max_tokens` (`preview`, `latest` of the v1 API sort after both).
 */
export const knowsCompletionTokens = (v: string) =>
  v.endsWith('-preview') ? v >= '2024-09-01' : v > '2024-10-21';

export const azureOpenai: Provider = {
  type: 'azure-openai',
  wire: 'openai',
  credentialHeaders: (c: Connection): Record<string, string> => (c.apiKey ? { 'api-key': c.apiKey } : {}),
  url(c, path, query, model) {
    const version = typeof c.config.apiVersion === 'string' ? c.config.apiVersion : AZURE_API_VERSION;
    const params = new URLSearchParams(query.replace(/^\?/, ''));
    if (!params.has('api-version')) params.set('api-version', version);
    // `/v1/chat/completions` -> `/openai/deployments/<model>/chat/completions`; `/openai/...` passes as is.
    const deployment = model ?? (typeof c.config.deployment === 'string' ? c.config.deployment : undefined);
    const p =
      path.startsWith('/v1/') && deployment
        ? `/openai/deployments/${encodeURIComponent(deployment)}${path.slice(3)}`
        : path;
    return joinUrl(c.baseUrl, p, params.toString());
  },
  chat: { mode: 'native' },
  chatLimitFields: (c) =>
    knowsCompletionTokens(typeof c.config.apiVersion === 'string' ? c.config.apiVersion : AZURE_API_VERSION)
      ? OPENAI_CHAT_LIMIT_FIELDS
      : ['max_tokens'],
  askStreamUsage: true,
};
