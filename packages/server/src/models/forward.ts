// One call to a provider, with fallbacks: for each usable connection in order, shape the request for it
// (credential swapped in, model pinned, translation when needed) and send it; a 429, a 5xx or a failed
// connection moves on to the next one. Nothing has reached the client yet at that point, so a fallback is
// invisible to it. The first answer that is neither is returned with its body unread.
import type { IncomingHttpHeaders } from 'node:http';
import type { Agent } from 'undici';
import { ApiError } from '../errors.js';
import { HOP_BY_HOP } from '../http/hop-by-hop.js';
import type { Endpoint, Upstream } from './endpoints.js';
import { type OutputLimit, withOutputLimit } from './output-limit.js';
import { type Cancel, type ProviderAnswer, type ProviderBody, providerCall } from './provider-call.js';
import { MAX_ERROR_BODY, providerError, transportError } from './provider-errors.js';
import { chatToMessages, STRUCTURED_TOOL } from './translate/openai-to-anthropic.js';
import { messagesToChat } from './translate/messages-request.js';
import { responsesToChat } from './translate/responses-request.js';
import type { Provider } from './providers/index.js';

/** The path every endpoint answers in OpenAI's format, whatever its provider. */
export const CHAT_PATH = '/v1/chat/completions';
/** OpenAI's Responses API, translated for Anthropic connections like chat. */
export const RESPONSES_PATH = '/v1/responses';

/** Anthropic's Messages API, translated to chat for connections speaking OpenAI's chat API. */
export const MESSAGES_PATH = '/v1/messages';

/** Whether the call is one Berth translates for a connection of `mode` (chat or Responses to Messages). */
const translated = (call: IncomingCall, mode: string) =>
  mode === 'anthropic' && call.method === 'POST' && (call.path === CHAT_PATH || call.path === RESPONSES_PATH);

/** Whether the call is an Anthropic Messages call Berth translates to chat for provider `p`. */
const fromMessages = (call: IncomingCall, p: Provider) =>
  p.wire !== 'anthropic' && p.chat.mode === 'native' && call.method === 'POST' && call.path === MESSAGES_PATH;

/** Anthropic-only paths (token counting, batches) no other provider serves. */
const ANTHROPIC_ONLY = /^\/v1\/messages\//;

export interface IncomingCall {
  method: string;
  /** The provider path after `/models/<name>`, e.g. `/v1/chat/completions`. */
  path: string;
  query: string;
  headers: IncomingHttpHeaders;
  raw?: Buffer;
  /** The parsed body when it is JSON. */
  json?: any;
  /** The model the call is for once pinned: the endpoint's (undefined when its spec names none). */
  model?: string;
  /** The output limit the request sets, and how many answers it asks for. */
  limit: OutputLimit;
  /** Output tokens the call may produce (for Anthropic, which needs max_tokens). */
  maxOutput: number;
  /** Under a budget limiting output: the limit per answer Berth reserved for, written into the request. */
  outputCap?: number;
}

export interface Prepared {
  url: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  /**
   * Anthropic's answer must be translated back to OpenAI's chat or Responses format, or a chat answer to
   * Anthropic's Messages format.
   */
  translate: false | 'chat' | 'responses' | 'messages';
  /** The tool through which a `response_format` was asked of Anthropic: its call is the answer. */
  structuredTool?: string;
  /** Berth asked for stream usage the caller did not: the usage-only chunk must not reach it. */
  stripUsageChunk?: boolean;
}

export interface Forwarded {
  upstream: Upstream;
  prepared: Prepared;
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: ProviderBody;
  /** Connections that failed before this one answered. */
  fellBackFrom: string[];
}

/** Inference paths whose body names a model: only these get the endpoint's model pinned. */
export const MODEL_PATHS =
  /\/(chat\/completions|completions|responses|embeddings|messages|messages\/count_tokens|moderations|images\/generations|audio\/speech|rerank|chat)$/;

/** Request headers never forwarded: hop-by-hop, the caller's credentials, and ones Berth sets itself. */
const DROP = new Set([
  ...HOP_BY_HOP,
  'host',
  'content-length',
  'authorization',
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'cookie',
  'accept-encoding',
  // The body goes out decoded (it was decoded to be judged).
  'content-encoding',
  'forwarded',
  'x-real-ip',
  'openai-organization',
  'openai-project',
]);
const DROP_PREFIX = ['x-service-', 'x-blaxel-', 'x-forwarded-'];

function forwardHeaders(h: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in h) {
    const v = h[k];
    // Every dropped prefix starts with `x-`: the others are not compared against them.
    if (v === undefined || DROP.has(k) || (k.startsWith('x-') && DROP_PREFIX.some((p) => k.startsWith(p))))
      continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/** The request as connection `up` needs it, or undefined when it cannot serve this path. */
export function prepare(ep: Endpoint, up: Upstream, call: IncomingCall): Prepared | undefined {
  const { provider, connection } = up;
  const isChat = call.path === CHAT_PATH && call.method === 'POST';
  const cred = provider.credentialHeaders(connection, ep.organization);
  if (translated(call, provider.chat.mode)) {
    if (!call.json) return undefined;
    const responses = call.path === RESPONSES_PATH;
    const chat = responses ? responsesToChat(call.json) : call.json;
    const body = chatToMessages(chat, call.model ?? '', call.maxOutput);
    return {
      url: provider.url(connection, '/v1/messages', ''),
      headers: {
        'content-type': 'application/json',
        accept: body.stream ? 'text/event-stream' : 'application/json',
        'accept-encoding': 'identity',
        ...cred,
      },
      body: JSON.stringify(body),
      translate: responses ? 'responses' : 'chat',
      structuredTool: chat.response_format ? STRUCTURED_TOOL : undefined,
    };
  }
  if (fromMessages(call, provider)) {
    if (!call.json) return undefined;
    const body = messagesToChat(call.json, {
      model: call.model,
      maxTokens: call.outputCap ?? call.limit.requested,
      limitField: (provider.chatLimitFields?.(connection) ?? ['max_tokens'])[0],
      streamUsage: !!provider.askStreamUsage,
    });
    return {
      url: provider.url(
        connection,
        (provider.chat.mode === 'native' && provider.chat.path) || CHAT_PATH,
        '',
        call.model,
      ),
      headers: {
        'content-type': 'application/json',
        accept: body.stream ? 'text/event-stream' : 'application/json',
        'accept-encoding': 'identity',
        ...cred,
      },
      body: JSON.stringify(body),
      translate: 'messages',
    };
  }
  // A native path other than OpenAI chat needs a connection speaking the endpoint's own API.
  if (!isChat && provider.wire !== ep.provider.wire) return undefined;
  // The forwarded headers' own object, written into (the credential last, so that it wins).
  const headers = forwardHeaders(call.headers);
  headers['accept-encoding'] = 'identity';
  Object.assign(headers, cred);
  if (call.headers['anthropic-version'] && provider.wire === 'anthropic')
    headers['anthropic-version'] = String(call.headers['anthropic-version']);
  let body: string | Buffer | undefined = call.raw;
  const json =
    call.json && typeof call.json === 'object' && !Array.isArray(call.json) ? call.json : undefined;
  // The model is the endpoint's (model-pin.ts judged what the call named): set on inference paths, and
  // wherever the body names one (the endpoint's own name becomes its model; removed when it has none).
  const pin =
    !!json &&
    ((MODEL_PATHS.test(call.path) && call.model !== undefined) || 'model' in json) &&
    json.model !== call.model;
  const askUsage =
    !!json &&
    isChat &&
    json.stream === true &&
    !!provider.askStreamUsage &&
    json.stream_options?.include_usage === undefined;
  const limited =
    json && call.outputCap !== undefined
      ? withOutputLimit(call.method, call.path, json, provider, connection, call.outputCap)
      : undefined;
  // The caller's bytes go as they came unless something must change.
  if (pin || askUsage || limited) {
    // withOutputLimit's answer is a copy already.
    const j = limited ?? { ...json };
    if (pin) {
      if (call.model === undefined) delete j.model;
      else j.model = call.model;
    }
    if (askUsage) j.stream_options = { ...(j.stream_options ?? {}), include_usage: true };
    body = JSON.stringify(j);
  }
  const path =
    isChat && provider.chat.mode === 'native' && provider.chat.path ? provider.chat.path : call.path;
  return {
    url: provider.url(connection, path, call.query, call.model),
    headers,
    body,
    translate: false,
    stripUsageChunk: askUsage,
  };
}

export interface ForwardOptions {
  agent: Agent;
  signal: Cancel;
  /** Longest wait for the provider's response headers (a long non-streamed generation counts here). */
  headersTimeoutMs: number;
  /** Longest silence between two body chunks. */
  bodyTimeoutMs: number;
  /** A connection could not be reached (`more`: another one is tried next). */
  onUnreachable?: (connection: string, err: ApiError, more: boolean) => void;
}

const retriable = (status: number) => status === 429 || status >= 500;

/** Whether connection `up` can serve this call at all (its wire format, or a translation of chat). */
function serves(ep: Endpoint, up: Upstream, call: IncomingCall): boolean {
  const isChat = call.path === CHAT_PATH && call.method === 'POST';
  if (translated(call, up.provider.chat.mode) || fromMessages(call, up.provider)) return !!call.json;
  if (up.provider.wire !== 'anthropic' && ANTHROPIC_ONLY.test(call.path)) return false;
  return isChat || up.provider.wire === ep.provider.wire;
}

export async function forward(ep: Endpoint, call: IncomingCall, o: ForwardOptions): Promise<Forwarded> {
  // Shaped one at a time: a fallback's request is only built when the one before it failed.
  const candidates = ep.upstreams.filter((up) => serves(ep, up, call));
  if (!candidates.length)
    throw new ApiError(
      'UNAVAILABLE',
      `no integration connection of model ${ep.name} speaks the API of ${call.path}`,
    );
  const failed: string[] = [];
  let last: ApiError | undefined;
  for (const [i, up] of candidates.entries()) {
    const more = i < candidates.length - 1;
    const prepared = prepare(ep, up, call)!;
    const secrets = up.connection.secretValues;
    let res: ProviderAnswer;
    try {
      res = await providerCall(o.agent, {
        url: prepared.url,
        method: call.method,
        headers: prepared.headers,
        body: call.method === 'GET' || call.method === 'HEAD' ? undefined : prepared.body,
        signal: o.signal,
        headersTimeout: o.headersTimeoutMs,
        bodyTimeout: o.bodyTimeoutMs,
      });
    } catch (err: any) {
      if (o.signal.aborted) throw err;
      last = transportError(up.connection.name, err);
      // A provider that accepted the call but is slow is not retried elsewhere: it may be generating.
      const slow = last.name === 'TIMEOUT' && err?.code !== 'UND_ERR_CONNECT_TIMEOUT';
      o.onUnreachable?.(up.connection.name, last, more && !slow);
      if (slow) throw last;
      failed.push(up.connection.name);
      continue;
    }
    if (res.statusCode < 400)
      return {
        upstream: up,
        prepared,
        statusCode: res.statusCode,
        headers: res.headers,
        body: res.body,
        fellBackFrom: failed,
      };
    const text = await res.body.head(MAX_ERROR_BODY);
    last = providerError(up.connection.name, res.statusCode, text, res.headers, secrets);
    if (!(retriable(res.statusCode) && more)) throw last;
    failed.push(up.connection.name);
  }
  throw last!;
}
