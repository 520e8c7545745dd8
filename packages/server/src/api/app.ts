// The Fastify app for /v0: body parsing, the problem renderer, authentication, and route modules.
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Authenticator } from '../auth/access.js';
import '../auth/request-access.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../http/json-depth.js';
import { lazyChildLogger } from '../http/lazy-request-logger.js';
import { wireErrorOf } from '../http/wire-error.js';
import { ApiError } from '../errors.js';
import { redactUrl } from '../log-redact.js';
import { DRIVE_JWKS_PATH } from './drive-tokens.js';
import { SERVER_VERSION } from './version.js';

export interface AppOptions {
  bodyLimit: number;
  logger: FastifyBaseLogger;
  authenticator: Authenticator;
}

const debugEnabled = (l: FastifyBaseLogger) =>
  (l as FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled?.('debug') ??
  true;

/** Routes under /v0 that answer without a credential. */
const PUBLIC_V0 = new Set(['/v0/oauth/token', '/v0/openapi.json', `/v0${DRIVE_JWKS_PATH}`]);

export function createApp(opts: AppOptions): FastifyInstance {
  const problem = (err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const e = wireErrorOf(err, {
      log: req.log,
      bodyLimit: opts.bodyLimit,
      contentType: req.headers['content-type'],
    });
    reply
      .code(e.status)
      .headers(e.headers)
      .type('application/problem+json')
      .send(e.toProblem(redactUrl(req.url.split('?')[0])));
  };
  const app = Fastify({
    bodyLimit: opts.bodyLimit,
    loggerInstance: opts.logger,
    // A log line per request cost a tenth of the API's throughput; /metrics counts and times every request, so
    // the per-request lines are written only when debugging (BERTH_LOG_LEVEL=debug). Errors are always logged.
    logController: new LogController({ disableRequestLogging: !debugEnabled(opts.logger) }),
    // ...and a request's child logger is made only if something logs through it (decision 074).
    childLoggerFactory: lazyChildLogger,
    // Keep-alive connections of load generators should not hold shutdown.
    forceCloseConnections: true,
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    // A URL the router cannot decode (`%zz`, an encoded lone surrogate) or a parameter past maxParamLength is
    // answered by Fastify before any handler: in the one problem shape too (found by the API fuzzer).
    frameworkErrors: problem,
  });
  app.decorateRequest('access', null);

  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(/^application\/([\w.+-]*\+)?json$/, { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    if (nestsDeeperThan(text, MAX_JSON_DEPTH))
      return done(
        new ApiError(
          'MALFORMED_REQUEST',
          `body nests deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`,
        ),
        undefined,
      );
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(new ApiError('MALFORMED_REQUEST', `body is not valid JSON: ${(e as Error).message}`), undefined);
    }
  });

  // Callback-style, so that a credential the caches answer costs no promise (most requests: decision 066).
  app.addHook('onRequest', (req, _reply, done) => {
    const q = req.url.indexOf('?');
    const path = q < 0 ? req.url : req.url.slice(0, q);
    if (!path.startsWith('/v0/') || PUBLIC_V0.has(path)) return done();
    // A scoped credential (a job task's) is never answered from the cache: its route is judged in `resolve`.
    const cached = opts.authenticator.resolveCached?.(req.headers);
    if (cached) {
      req.access = cached;
      return done();
    }
    opts.authenticator.resolve(req.headers, { method: req.method, path }).then((access) => {
      req.access = access;
      done();
    }, done);
  });

  app.setErrorHandler(problem);

  app.setNotFoundHandler((req, reply) => {
    const e = new ApiError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`);
    reply.code(404).type('application/problem+json').send(e.toProblem());
  });

  app.get('/healthz', async () => ({ status: 'ok', version: SERVER_VERSION }));
  return app;
}
