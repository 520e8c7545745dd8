// What the gateway needs to know about an LLM provider: where it lives, how its credential is sent,
// how its native paths map to URLs and how an OpenAI-style /v1/chat/completions reaches it.

/** The wire format of a provider's native API; fallbacks for a native path must share it. */
export type Wire = 'openai' | 'anthropic' | 'gemini' | 'cohere';

/** An integration connection opened for use: settings plus the decrypted credential. */
export interface Connection {
  name: string;
  integration: string;
  /** `spec.config.baseUrl`, else the provider's default; no trailing slash. */
  baseUrl: string;
  config: Record<string, unknown>;
  apiKey?: string;
  /** Every secret value, for scrubbing provider messages. */
  secretValues: string[];
}

/** How `/v1/chat/completions` in OpenAI's format is served by a provider. */
export type ChatRoute =
  /** The provider speaks it natively (at `path` when it lives elsewhere, e.g. Gemini's compatibility layer). */
  | { mode: 'native'; path?: string }
  /** Berth translates to and from Anthropic's Messages API. */
  | { mode: 'anthropic' };

export interface Provider {
  type: string;
  wire: Wire;
  /** Where the provider lives when the connection names no baseUrl; absent = baseUrl is required. */
  defaultBaseUrl?: string;
  /** Whether a connection works without a key (self-hosted OpenAI-compatible servers). */
  keyOptional?: boolean;
  /** Headers that carry the credential (and required protocol headers). */
  credentialHeaders(c: Connection, organization?: string): Record<string, string>;
  /** The upstream URL of a pass-through path (`/v1/...`, with its query string). */
  url(c: Connection, path: string, query: string, model?: string): string;
  chat: ChatRoute;
  /**
   * Fields of an OpenAI-style chat request the provider is known to honour as its output limit, the first
   * being the one Berth sets (default `['max_tokens']`, which every OpenAI-compatible server reads).
   */
  chatLimitFields?(c: Connection): string[];
  /** OpenAI-style streams report usage only when asked (`stream_options.include_usage`). */
  askStreamUsage?: boolean;
  /** Path listing the provider's models, in its own format; absent = no list offered. */
  modelsPath?: string;
}

/** Joins a base URL and a path, dropping a `/v1` the base already ends with (`http://h/v1` + `/v1/x`). */
export function joinUrl(base: string, path: string, query = ''): string {
  const b = base.replace(/\/+$/, '');
  const p = path.startsWith('/') ? path : `/${path}`;
  const deduped = /\/v1$/.test(b) && (p === '/v1' || p.startsWith('/v1/')) ? p.slice(3) : p;
  return `${b}${deduped}${query ? (query.startsWith('?') ? query : `?${query}`) : ''}`;
}
