// A provider's failure as a Berth problem: the provider's own message kept (minus anything that looks like
// its credential), the status mapped so the caller is never told its Berth key is wrong when the stored
// provider key is, and transport failures as 502 (unreachable) or 504 (too slow).
import { ApiError, type WireErrorName } from '../errors.js';
import { OutboundRefused } from '../outbound/index.js';

/** Provider bodies read for their message; anything longer is cut (error bodies are small). */
export const MAX_ERROR_BODY = 64 * 1024;

/** Removes every secret value, and key-shaped tokens providers echo half-masked (`sk-abc***xyz`). */
export function scrub(text: string, secrets: string[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join('[redacted]');
  return out.replace(/\b(sk|pk|rk|key|gsk|xai|AIza)[-_A-Za-z0-9*.]{8,}/g, '[redacted]');
}

/** The message inside a provider's error body, whatever its shape (OpenAI, Anthropic, Gemini, Cohere). */
export function providerMessage(text: string): string {
  try {
    const j = JSON.parse(text);
    const m = j?.error?.message ?? j?.message ?? j?.detail ?? j?.error;
    if (typeof m === 'string' && m) return m;
    if (Array.isArray(j) && typeof j[0]?.error?.message === 'string') return j[0].error.message;
  } catch {
    // A plain-text or HTML error page: keep its start.
  }
  return text.trim().slice(0, 500) || 'no message';
}

const BY_STATUS: Record<number, WireErrorName> = {
  400: 'MALFORMED_REQUEST',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'VALIDATION_FAILED',
  429: 'RATE_LIMITED',
};

export function providerError(
  connection: string,
  status: number,
  body: string,
  headers: Record<string, string | string[] | undefined>,
  secrets: string[],
): ApiError {
  const message = scrub(providerMessage(body), secrets);
  if (status === 401 || status === 403)
    return new ApiError(
      'BAD_GATEWAY',
      `the provider refused the credential stored in integration connection ${connection} (HTTP ${status}): ${message}`,
    );
  if (status === 429) {
    const retry = headers['retry-after'];
    const h: Record<string, string> = {};
    if (typeof retry === 'string' && /^\d+$/.test(retry)) h['retry-after'] = retry;
    return new ApiError('RATE_LIMITED', `the provider is rate limiting: ${message}`, {
      headers: h,
      code: 'PROVIDER_RATE_LIMITED',
    });
  }
  // Anthropic's "overloaded": kept as such (its clients back off on it), as 503 for OpenAI-style clients.
  if (status === 529 || status === 503) {
    const retry = headers['retry-after'];
    return new ApiError('UNAVAILABLE', `the provider is overloaded: ${message}`, {
      status,
      code: 'PROVIDER_OVERLOADED',
      headers: typeof retry === 'string' && /^\d+$/.test(retry) ? { 'retry-after': retry } : {},
    });
  }
  const name = BY_STATUS[status];
  if (name) return new ApiError(name, message, { status });
  if (status >= 400 && status < 500) return new ApiError('MALFORMED_REQUEST', message, { status });
  return new ApiError('BAD_GATEWAY', `the provider failed (HTTP ${status}): ${message}`);
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'ETIMEDOUT',
]);

export const isTimeout = (err: any) => TIMEOUT_CODES.has(err?.code) || err?.name === 'TimeoutError';

/** A transport failure (no HTTP answer) as 502 or 504. */
export function transportError(connection: string, err: any): ApiError {
  // Never dialled: the connection's address is one the outbound rules close (outbound/).
  if (err instanceof OutboundRefused)
    return new ApiError(
      'BAD_GATEWAY',
      `integration connection ${connection} points at an address Berth does not send requests to: ${err.message}`,
    );
  const why = err?.code ? `${err.code}` : (err?.message ?? 'unknown error');
  if (isTimeout(err))
    return new ApiError(
      'TIMEOUT',
      `the provider of integration connection ${connection} did not answer in time (${why})`,
    );
  return new ApiError(
    'BAD_GATEWAY',
    `cannot reach the provider of integration connection ${connection} (${why})`,
  );
}
