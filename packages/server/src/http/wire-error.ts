// The one mapping from what a handler threw to what the client sees, shared by both HTTP edges (the /v0 API and
// the gateways): ApiErrors as they are, store races (StoreError) to 404/409 with the kind-specific code, a database
// out of reach to a 503 with Retry-After, Fastify's own request errors to their 4xx, and anything else to a 500
// whose cause goes to the log only.
import { ApiError, alreadyExists, notFound } from '../errors.js';
import { FencedError, StoreError, StoreUnavailableError } from '../store/store.js';

export interface WireErrorContext {
  /** Where a 500's cause is logged. */
  log?: { error(obj: object, msg: string): void };
  /** What failed, for the log line of a 500. */
  what?: string;
  /** The body limit in force, for a 413's message. */
  bodyLimit?: number;
  /** The request's content type, for a 415's message. */
  contentType?: string;
}

export function wireErrorOf(err: any, ctx: WireErrorContext = {}): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof StoreError) {
    const { kind, name } = err.key;
    if (err.reason === 'exists') return alreadyExists(kind, name);
    if (err.reason === 'not_found') return notFound(`${kind} ${JSON.stringify(name)}`);
    return new ApiError(
      'CONFLICT',
      `${kind} ${JSON.stringify(name)} was changed since it was read; read it again and retry`,
    );
  }
  if (err instanceof StoreUnavailableError) {
    ctx.log?.error({ err: err.cause }, 'the database is not reachable');
    return new ApiError('UNAVAILABLE', 'the database is not reachable; retry in a moment', {
      headers: { 'retry-after': '1' },
    });
  }
  // A write of this server's refused by the cluster (it stopped leading, or no longer holds the sandbox): another
  // server answers the same request in a moment.
  if (err instanceof FencedError)
    return new ApiError(
      'UNAVAILABLE',
      err.lost === 'lead'
        ? 'this server no longer leads the cluster; retry in a moment'
        : `this node no longer holds ${err.key.kind} ${JSON.stringify(err.key.name)}; retry in a moment`,
      { headers: { 'retry-after': '1' } },
    );
  if (err?.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new ApiError(
      'PAYLOAD_TOO_LARGE',
      ctx.bodyLimit ? `body is larger than ${ctx.bodyLimit} bytes` : err.message,
    );
  if (err?.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new ApiError(
      'UNSUPPORTED_MEDIA_TYPE',
      `content type ${ctx.contentType} is not supported; send application/json`,
    );
  if (err?.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || err?.code === 'FST_ERR_CTP_INVALID_JSON_BODY')
    return new ApiError('MALFORMED_REQUEST', 'body is not valid JSON');
  if (err?.validation) return new ApiError('MALFORMED_REQUEST', err.message);
  if (typeof err?.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500)
    return new ApiError('MALFORMED_REQUEST', err.message, { status: err.statusCode });
  ctx.log?.error({ err }, ctx.what ?? 'unhandled error');
  return new ApiError('INTERNAL', 'internal error; the server log has the details');
}
