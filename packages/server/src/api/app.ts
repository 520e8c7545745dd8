// The Fastify app for /v0: body parsing, the problem renderer, authentication, and route modules.
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Authenticator } from '../auth/access.js';
import './context.js';
import { StoreError } from '../store/store.js';
import { ApiError } from './errors.js';

export interface AppOptions {
  bodyLimit: number;
  logger: FastifyBaseLogger;
  authenticator: Authenticator;
}

const debugEnabled = (l: FastifyBaseLogger) =>
  (l as FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled?.('debug') ??
  true;

/** Routes under /v0 that answer without a credential. */
const PUBLIC_V0 = new Set(['/v0/oauth/token', '/v0/openapi.json']);

export function createApp(opts: AppOptions): FastifyInstance {
  const app = Fastify({
    bodyLimit: opts.bodyLimit,
    loggerInstance: opts.logger,
    // A log line per request cost a tenth of the API's throughput; /metrics counts and times every request, so
    // the per-request lines are written only when debugging (BERTH_LOG_LEVEL=debug). Errors are always logged.
    logController: new LogController({ disableRequestLogging: !debugEnabled(opts.logger) }),
    // Keep-alive connections of load generators should not hold shutdown.
    forceCloseConnections: true,
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
  });
  app.decorateRequest('access', null);

  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(/^application\/([\w.+-]*\+)?json$/, { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(new ApiError('MALFORMED_REQUEST', `body is not valid JSON: ${(e as Error).message}`), undefined);
    }
  });

  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?')[0];
    if (!path.startsWith('/v0/') || PUBLIC_V0.has(path)) return;
    req.access = await opts.authenticator.resolve(req.headers);
  });

  app.setErrorHandler((err: any, req, reply) => {
    const e = apiErrorOf(err, req, 'unhandled error', opts.bodyLimit);
    reply
      .code(e.status)
      .headers(e.headers)
      .type('application/problem+json')
      .send(e.toProblem(req.url.split('?')[0]));
  });

  app.setNotFoundHandler((req, reply) => {
    const e = new ApiError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`);
    reply.code(404).type('application/problem+json').send(e.toProblem());
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  return app;
}

/**
 * The wire error for whatever a route threw: ApiErrors as they are, Fastify's own (body, content type, JSON,
 * schema) and store races mapped to their 4xx; anything else is logged as `what` and becomes a 500.
 */
export function apiErrorOf(err: any, req: FastifyRequest, what: string, bodyLimit?: number): ApiError {
  if (err instanceof ApiError) return err;
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new ApiError(
      'PAYLOAD_TOO_LARGE',
      bodyLimit ? `body is larger than ${bodyLimit} bytes` : err.message,
    );
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new ApiError(
      'UNSUPPORTED_MEDIA_TYPE',
      `content type ${req.headers['content-type']} is not supported; send application/json`,
    );
  if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY')
    return new ApiError('MALFORMED_REQUEST', 'body is not valid JSON');
  if (err.validation) return new ApiError('MALFORMED_REQUEST', err.message);
  if (err instanceof StoreError) {
    // A write that lost a race where no handler judged it again: the caller may retry; still, say so in the log.
    req.log.warn({ err }, 'a store race reached the client');
    const what = `${err.key.kind} ${JSON.stringify(err.key.name)}`;
    if (err.reason === 'not_found') return new ApiError('NOT_FOUND', `${what} not found`);
    if (err.reason === 'exists') return new ApiError('ALREADY_EXISTS', `${what} already exists`);
    return new ApiError('CONFLICT', `${what} changed meanwhile; retry`);
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500)
    return new ApiError('MALFORMED_REQUEST', err.message, { status: err.statusCode });
  req.log.error({ err }, what);
  return new ApiError('INTERNAL', 'internal error; the server log has the details');
}
