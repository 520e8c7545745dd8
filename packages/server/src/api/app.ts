// The Fastify app for /v0: body parsing, the problem renderer, authentication, and route modules.
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
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
    let e: ApiError;
    if (err instanceof ApiError) e = err;
    else if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      e = new ApiError('PAYLOAD_TOO_LARGE', `body is larger than ${opts.bodyLimit} bytes`);
    else if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
      e = new ApiError(
        'UNSUPPORTED_MEDIA_TYPE',
        `content type ${req.headers['content-type']} is not supported; send application/json`,
      );
    else if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY')
      e = new ApiError('MALFORMED_REQUEST', 'body is not valid JSON');
    else if (err.validation) e = new ApiError('MALFORMED_REQUEST', err.message);
    else if (err instanceof StoreError) {
      // A write that lost a race where no handler judged it again: the caller may retry; still, say so in the log.
      req.log.warn({ err }, 'a store race reached the client');
      e =
        err.reason === 'not_found'
          ? new ApiError('NOT_FOUND', `${err.key.kind} ${JSON.stringify(err.key.name)} not found`)
          : err.reason === 'exists'
            ? new ApiError('ALREADY_EXISTS', `${err.key.kind} ${JSON.stringify(err.key.name)} already exists`)
            : new ApiError(
                'CONFLICT',
                `${err.key.kind} ${JSON.stringify(err.key.name)} changed meanwhile; retry`,
              );
    } else if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500)
      e = new ApiError('MALFORMED_REQUEST', err.message, { status: err.statusCode });
    else {
      req.log.error({ err }, 'unhandled error');
      e = new ApiError('INTERNAL', 'internal error; the server log has the details');
    }
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
