// OAuth2 token endpoint (RFC 6749 §4.4, client_credentials) at /v0/oauth/token and /oauth/token, and the
// signing key's public half at /.well-known/jwks.json. Both are public; errors use RFC 6749's shape,
// not problem+json, because OAuth clients read `error` and `error_description`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { matchesHash } from '../auth/credentials.js';
import type { AuthContext } from '../auth/index.js';
import { keys, type ServiceAccountRecord } from '../auth/records.js';
import { ACCESS_TOKEN_TTL_S, JWT_ALG } from '../auth/signing-key.js';
import { ApiError } from '../errors.js';

export type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'unsupported_grant_type' | 'server_error';

class OAuthError extends Error {
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    readonly status: number,
  ) {
    super(description);
  }
}

const badClient = () => new OAuthError('invalid_client', 'client authentication failed', 401);

/** RFC 6749 §2.3.1: client_id and client_secret are form-encoded before they are put in Basic. */
function formDecode(s: string) {
  try {
    return decodeURIComponent(s.replaceAll('+', ' '));
  } catch {
    return s;
  }
}

function basicCredentials(req: FastifyRequest): { id: string; secret: string } | undefined {
  const h = req.headers.authorization;
  if (!h) return undefined;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(h);
  if (!m) throw new OAuthError('invalid_request', 'the Authorization header must be Basic credentials', 400);
  const text = Buffer.from(m[1], 'base64').toString('utf8');
  const i = text.indexOf(':');
  if (i < 0) throw badClient();
  return { id: formDecode(text.slice(0, i)), secret: formDecode(text.slice(i + 1)) };
}

function registerToken(scope: FastifyInstance, ctx: AuthContext, path: string) {
  scope.register(async (s) => {
    // Encapsulated: the form parser and the RFC 6749 error shape apply to the token route only.
    s.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(String(body))));
    });
    s.setErrorHandler((err: any, req, reply) => {
      if (err instanceof OAuthError) return sendError(reply, err);
      const status =
        err instanceof ApiError ? err.status : typeof err.statusCode === 'number' ? err.statusCode : 500;
      if (status >= 500) {
        req.log.error({ err }, 'token endpoint failed');
        return sendError(
          reply,
          new OAuthError('server_error', 'internal error; the server log has the details', 500),
        );
      }
      return sendError(reply, new OAuthError('invalid_request', err.message, status));
    });
    s.post(path, async (req, reply) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (typeof body !== 'object' || Array.isArray(body))
        throw new OAuthError('invalid_request', 'the body must be a JSON object or a form', 400);
      const grant = body.grant_type;
      if (typeof grant !== 'string' || !grant)
        throw new OAuthError('invalid_request', 'grant_type is required', 400);
      if (grant !== 'client_credentials')
        throw new OAuthError(
          'unsupported_grant_type',
          `grant_type ${grant} is not supported; use client_credentials`,
          400,
        );
      const basic = basicCredentials(req);
      const inBody = body.client_id !== undefined || body.client_secret !== undefined;
      if (basic && inBody)
        throw new OAuthError(
          'invalid_request',
          'send client credentials either in Basic or in the body, not both',
          400,
        );
      const id = basic?.id ?? body.client_id;
      const secret = basic?.secret ?? body.client_secret;
      if (typeof id !== 'string' || typeof secret !== 'string' || !id || !secret) throw badClient();
      const home = await ctx.store.get(keys.clientId(id));
      const sa = home && (await ctx.store.get(keys.serviceAccount(home.body.workspace, id)));
      if (!sa || !matchesHash(secret, (sa.body as ServiceAccountRecord).secretHash)) throw badClient();
      const access_token = await ctx.signingKey.sign(
        { sub: id, workspace: home.body.workspace },
        ctx.issuer(),
      );
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      return { access_token, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_S };
    });
  });
}

function sendError(reply: FastifyReply, e: OAuthError) {
  if (e.code === 'invalid_client') reply.header('www-authenticate', 'Basic realm="berth"');
  return reply
    .code(e.status)
    .header('cache-control', 'no-store')
    .type('application/json')
    .send({ error: e.code, error_description: e.description });
}

/** Inside the /v0 plugin: `/v0/oauth/token` (app.ts exempts it from authentication). */
export function registerOAuthV0(v0: FastifyInstance, ctx: AuthContext) {
  registerToken(v0, ctx, '/oauth/token');
}

/** At the root: `/oauth/token`, the JWKS and the authorization server metadata (RFC 8414). */
export function registerOAuthPublic(app: FastifyInstance, ctx: AuthContext) {
  registerToken(app, ctx, '/oauth/token');
  app.get('/.well-known/jwks.json', async (_req, reply) => {
    reply.header('cache-control', 'public, max-age=300');
    return ctx.signingKey.jwks();
  });
  app.get('/.well-known/oauth-authorization-server', async () => {
    const base = ctx.issuer();
    return {
      issuer: base,
      token_endpoint: `${base}/oauth/token`,
      jwks_uri: `${base}/.well-known/jwks.json`,
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      token_endpoint_auth_signing_alg_values_supported: [JWT_ALG],
    };
  });
}
