// A real OpenID provider for the OAuth tests: the certified `oidc-provider` package on loopback, set up the way a
// mail provider's authorization server is seen from a tenant (§5): a confidential client whose redirect URI is the
// tenant backend's, a send-mail scope (`mail.send`) that a second client does not have enabled, refresh tokens only
// for an authorization that asked for offline access (`access_type=offline`, as Google does), rotated at every
// refresh, and short-lived JWT access tokens for the mail API (`https://mail.test`) that name the user's address.
import { generateKeyPairSync, type JsonWebKey } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type ClientMetadata, type Configuration } from 'oidc-provider';

/** The send-mail scope of the test mail API. */
export const MAIL_SCOPE = 'mail.send';
/** The mail API's resource indicator: the audience of its access tokens. */
export const MAIL_AUDIENCE = 'https://mail.test';
/** The tenant's OAuth application (its client secret goes in the connection, §5 step 5). */
export const TENANT_CLIENT = { id: 'tenant-app', secret: 'tenant-app-secret-4f1c9a' };
/** An application whose console has the mail API off: asking it for `mail.send` is an invalid scope (§7). */
export const NO_MAIL_CLIENT = { id: 'tenant-app-no-mail', secret: 'tenant-app-no-mail-secret-77b2' };
/** An application authenticating with HTTP Basic at the token endpoint (RFC 6749 §2.3.1). */
export const BASIC_CLIENT = { id: 'tenant-app-basic', secret: 'tenant-app-basic-secret-2d8e' };

export interface TestProvider {
  /** The issuer (`http://127.0.0.1:<port>`); its token endpoint is `${issuer}/token`. */
  issuer: string;
  tokenUrl: string;
  authUrl: string;
  /** The public key the mail API checks access tokens with. */
  publicJwk: JsonWebKey;
  /** Revokes every grant of the account (what a user does at the provider's "third-party access" page). */
  revoke(account: string): Promise<void>;
  /**
   * A refresh token for `account` as the code exchange of a consented authorization with offline access would give
   * it, made by the provider itself (tests of the refresh path that need no browser).
   */
  issueRefreshToken(account: string, client?: { id: string }): Promise<string>;
  /** Refresh-token grants the provider answered, and how many it refused (for rotation checks). */
  counts: { refreshed: number; refused: number };
  /** Every refresh token the provider issued (to check none of them shows anywhere). */
  refreshTokens: Set<string>;
  /** How the client authenticated at the last token request answered: `basic` (header) or `post` (body). */
  lastClientAuth(): 'basic' | 'post' | undefined;
  provider: Provider;
  close(): Promise<void>;
}

export interface TestProviderOptions {
  /** The redirect URIs registered for the tenant's clients (exact matches, §5). */
  redirectUris: string[];
  /** Access token lifetime in seconds: short, so refreshes happen during a test. */
  accessTokenTtlS: number;
  /** Port to listen on (0: any): a restarted provider keeps its address. */
  port?: number;
}

export async function startTestProvider(opts: TestProviderOptions): Promise<TestProvider> {
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(opts.port ?? 0, '127.0.0.1', () => r()));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = 'test-es256';
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' };
  const publicJwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' };
  const grants = new Map<string, Set<string>>();
  const client = (
    c: { id: string; secret: string },
    scope: string,
    auth: ClientMetadata['token_endpoint_auth_method'] = 'client_secret_post',
  ): ClientMetadata => ({
    client_id: c.id,
    client_secret: c.secret,
    redirect_uris: opts.redirectUris,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code' as const],
    token_endpoint_auth_method: auth,
    scope,
  });
  const configuration: Configuration = {
    clients: [
      client(TENANT_CLIENT, `openid profile email offline_access ${MAIL_SCOPE}`),
      client(NO_MAIL_CLIENT, 'openid profile email offline_access'),
      client(BASIC_CLIENT, `openid profile email offline_access ${MAIL_SCOPE}`, 'client_secret_basic'),
    ],
    jwks: { keys: [jwk as any] },
    clientDefaults: { id_token_signed_response_alg: 'ES256' },
    cookies: { keys: ['berth-test-provider-cookie-key'] },
    scopes: ['openid', 'offline_access', 'profile', 'email', MAIL_SCOPE],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    // Google's way to ask for a refresh token: access_type=offline stands for the offline_access scope.
    extraParams: {
      access_type(ctx: any, value: string | undefined) {
        if (value !== 'offline') return;
        const scopes = new Set(
          String(ctx.oidc.params.scope ?? '')
            .split(' ')
            .filter(Boolean),
        );
        scopes.add('offline_access');
        ctx.oidc.params.scope = [...scopes].join(' ');
      },
    },
    issueRefreshToken: async (_ctx: any, c: any, code: any) =>
      c.grantTypeAllowed('refresh_token') && code.scopes.has('offline_access'),
    rotateRefreshToken: () => true,
    ttl: {
      AccessToken: opts.accessTokenTtlS,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 24 * 3600,
      Grant: 24 * 3600,
      Interaction: 600,
      Session: 3600,
    },
    features: {
      devInteractions: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => MAIL_AUDIENCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: MAIL_SCOPE,
          audience: MAIL_AUDIENCE,
          accessTokenTTL: opts.accessTokenTtlS,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
    // The user's mail address rides in the access token, so the mail API knows whom a message is from.
    extraTokenClaims: (_ctx: any, token: any) =>
      token.accountId ? { email: `${token.accountId}@example.test` } : undefined,
    findAccount: (_ctx: any, id: string) => ({
      accountId: id,
      claims: () => ({ sub: id, email: `${id}@example.test`, email_verified: true, name: id }),
    }),
  };
  const provider = new Provider(issuer, configuration);
  const counts = { refreshed: 0, refused: 0 };
  let lastAuth: 'basic' | 'post' | undefined;
  const refreshTokens = new Set<string>();
  provider.on('refresh_token.saved', (t: any) => refreshTokens.add(t.jti));
  provider.on('authorization_code.consumed', (code: any) => {
    if (!grants.has(code.accountId)) grants.set(code.accountId, new Set());
    grants.get(code.accountId)?.add(code.grantId);
  });
  provider.on('grant.success', (ctx: any) => {
    lastAuth = /^basic /i.test(String(ctx.headers.authorization ?? '')) ? 'basic' : 'post';
    if (ctx.oidc.params?.grant_type === 'refresh_token') counts.refreshed++;
  });
  provider.on('grant.error', (ctx: any) => {
    if (ctx.oidc.params?.grant_type === 'refresh_token') counts.refused++;
  });
  server.on('request', provider.callback());
  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    authUrl: `${issuer}/auth`,
    publicJwk,
    counts,
    lastClientAuth: () => lastAuth,
    refreshTokens,
    provider,
    async issueRefreshToken(account, c = TENANT_CLIENT) {
      const scope = `openid email offline_access ${MAIL_SCOPE}`;
      const grant = new provider.Grant({ accountId: account, clientId: c.id });
      grant.addOIDCScope('openid email offline_access');
      grant.addResourceScope(MAIL_AUDIENCE, MAIL_SCOPE);
      const grantId = await grant.save();
      if (!grants.has(account)) grants.set(account, new Set());
      grants.get(account)?.add(grantId);
      const client = await provider.Client.find(c.id);
      const rt = new provider.RefreshToken({
        accountId: account,
        client,
        grantId,
        scope,
        resource: MAIL_AUDIENCE,
        gty: 'authorization_code',
      } as any);
      return rt.save();
    },
    async revoke(account) {
      for (const grantId of grants.get(account) ?? []) {
        await (await provider.Grant.find(grantId))?.destroy();
        for (const model of ['RefreshToken', 'AccessToken', 'AuthorizationCode'] as const)
          await (provider as any)[model].adapter.revokeByGrantId(grantId);
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
