// Errors on the inference surface. On OpenAI-style paths they are the same problem+json documents as on
// /v0, except that `error` is an object `{message, type, code}`: the openai client reads only `body.error`
// (and would show a bare code otherwise), and the service's SDK reads the numeric `code`. On Anthropic's
// paths (`/v1/messages`, `/messages`) they are Anthropic's own shape, `{type: "error", error: {type,
// message}}` (plus the same `code`, `status`, `detail`): @anthropic-ai/sdk and @ai-sdk/anthropic read
// only that, and show a bare status text otherwise.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { ApiError } from '../errors.js';
import { wireErrorOf } from '../http/wire-error.js';

/** Anthropic's status of an overloaded provider; OpenAI-style clients are answered 503 for it. */
export const OVERLOADED_STATUS = 529;

export function inferenceProblem(e: ApiError, instance?: string) {
  return {
    ...e.toProblem(instance),
    error: { message: e.detail, type: e.error, code: e.error, param: null },
  };
}

/** Anthropic's error type for an HTTP status (https://docs.anthropic.com/en/api/errors). */
export function anthropicErrorType(status: number): string {
  if (status === 400 || status === 405 || status === 415 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 504) return 'timeout_error';
  if (status === OVERLOADED_STATUS) return 'overloaded_error';
  return 'api_error';
}

export function anthropicProblem(e: ApiError, instance?: string) {
  const { type: _problemType, ...problem } = e.toProblem(instance);
  return {
    ...problem,
    type: 'error',
    error: { type: anthropicErrorType(e.status), message: e.detail, code: e.error },
  };
}

/** Paths of Anthropic's API on a model endpoint (with or without the /v1 that @ai-sdk/anthropic adds). */
export const isAnthropicPath = (url: string) => /\/models\/[^/?]+(\/v1)?\/messages(\/|\?|$)/.test(url);

/**
 * Answers a model call that failed before its answer began; one that failed mid-answer is cut (its client sees
 * the stream end early, as from the provider). Nobody is answered when the client already left.
 */
export function sendInferenceProblem(
  req: IncomingMessage,
  res: ServerResponse,
  err: any,
  log: FastifyBaseLogger,
): void {
  if (res.destroyed || err?.name === 'AbortError' || err?.code === 'UND_ERR_ABORTED') return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const e = wireErrorOf(err, { log, what: 'unhandled error in the model gateway' });
  const instance = (req.url ?? '/').split('?')[0];
  const anthropic = isAnthropicPath(instance);
  const body = JSON.stringify(anthropic ? anthropicProblem(e, instance) : inferenceProblem(e, instance));
  res.writeHead(anthropic || e.status !== OVERLOADED_STATUS ? e.status : 503, {
    ...e.headers,
    'content-type': anthropic ? 'application/json' : 'application/problem+json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
