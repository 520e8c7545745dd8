// OAuth2 integration connections (§5 "Tenant OAuth flow", decision 049): an end user's grant at a provider, held as
// CLIENT_ID, CLIENT_SECRET and REFRESH_TOKEN, which Berth turns into fresh access tokens for the workloads bound to
// it. What a connection's config means, the presets whose addresses are well known, and the rules a write must keep.
import type { FieldIssue } from '../errors.js';

/** The generic integration: every address in `spec.config`. */
export const OAUTH2 = 'oauth2';

/** How the client authenticates at the token endpoint (RFC 6749 §2.3.1; the OIDC names). */
export const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'] as const;
export type ClientAuth = (typeof CLIENT_AUTH_METHODS)[number];

export interface OAuth2Preset {
  authUrl: string;
  tokenUrl: string;
  /** The provider's API hosts: where the egress proxy puts `Authorization: Bearer` for a bound workload. */
  apiDomains: string[];
  clientAuth: ClientAuth;
}

/**
 * Providers whose addresses are well known. Google gives a refresh token only with `access_type=offline` (and again
 * on a later consent only with `prompt=consent`); Microsoft gives one for the `offline_access` scope.
 */
export const OAUTH2_PRESETS: Record<string, OAuth2Preset> = {
  google: {
    authUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: 'https://oauth2.googleapis.com/token',
    apiDomains: ['gmail.googleapis.com', 'www.googleapis.com'],
    clientAuth: 'client_secret_post',
  },
  microsoft: {
    authUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
    tokenUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
    apiDomains: ['graph.microsoft.com'],
    clientAuth: 'client_secret_post',
  },
};

export const OAUTH2_INTEGRATIONS = [OAUTH2, ...Object.keys(OAUTH2_PRESETS)] as const;

export const isOAuth2 = (integration: unknown): boolean =>
  typeof integration === 'string' && (OAUTH2_INTEGRATIONS as readonly string[]).includes(integration);

/** The secret names of §5 step 5, exactly as the tenant backend writes them. */
export const CLIENT_ID = 'CLIENT_ID';
export const CLIENT_SECRET = 'CLIENT_SECRET';
export const REFRESH_TOKEN = 'REFRESH_TOKEN';

/**
 * The words of §7 for a grant Berth cannot refresh; every status, event and problem about it starts with them, so a
 * tenant backend can match them and ask its user to connect again.
 */
export const REFRESH_FAILED = 'refresh token missing or refresh fails';
/** The `error` of the problem a call to a workload gets while one of its connections is refused (gateway). */
export const OAUTH_REFRESH_FAILED = 'OAUTH_REFRESH_FAILED';
/** What the user does about it. */
export const RECONNECT_ADVICE =
  'connect again with offline access (access_type=offline in the authorization request, prompt=consent to be asked again) and replace the connection with the new REFRESH_TOKEN';

/** A connection's config with its preset applied: everything Berth needs to refresh and to inject. */
export interface OAuth2Config {
  tokenUrl: string;
  authUrl?: string;
  scopes: string[];
  apiDomains: string[];
  clientAuth: ClientAuth;
}

const strings = (v: unknown): string[] =>
  typeof v === 'string' ? v.split(/\s+/).filter(Boolean) : Array.isArray(v) ? v.map(String) : [];

/** The effective config of an OAuth2 connection (spec.config over its preset); undefined for other integrations. */
export function oauth2Config(spec: { integration?: string; config?: Record<string, unknown> }) {
  if (!isOAuth2(spec.integration)) return undefined;
  const preset = OAUTH2_PRESETS[spec.integration as string];
  const c = spec.config ?? {};
  const str = (k: string) => (typeof c[k] === 'string' && c[k] ? (c[k] as string) : undefined);
  const out: OAuth2Config = {
    tokenUrl: str('tokenUrl') ?? preset?.tokenUrl ?? '',
    authUrl: str('authUrl') ?? preset?.authUrl,
    scopes: strings(c.scopes),
    apiDomains: c.apiDomains === undefined ? (preset?.apiDomains ?? []) : strings(c.apiDomains),
    // §5 step 4 sends client_id and client_secret in the form; so does a refresh unless the config says Basic.
    clientAuth: (str('clientAuth') as ClientAuth | undefined) ?? preset?.clientAuth ?? 'client_secret_post',
  };
  return out;
}

/** A domain pattern as the egress proxy matches it: a name, or `*.` and a name. `*` alone would send it anywhere. */
const DOMAIN = /^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/i;

/** A URL Berth or a browser is sent to: http(s), no credentials (they would sit in a field every reader sees). */
function urlIssue(v: unknown, pointer: string, fragmentOk: boolean): FieldIssue[] {
  const issue = (message: string) => [{ pointer, message }];
  if (typeof v !== 'string') return issue('must be an http or https URL');
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return issue('must be an http or https URL');
  }
  if (!['http:', 'https:'].includes(u.protocol)) return issue('must be an http or https URL');
  if (u.username || u.password)
    return issue('must not carry credentials: put them in spec.secret, where they are encrypted');
  if (!fragmentOk && v.includes('#')) return issue('must not carry a fragment');
  return [];
}

/** The rules an OAuth2 connection's spec keeps (beyond the schema); none for other integrations. */
export function oauth2Issues(spec: any): FieldIssue[] {
  if (!isOAuth2(spec?.integration)) return [];
  const out: FieldIssue[] = [];
  const c = (spec.config ?? {}) as Record<string, unknown>;
  const preset = OAUTH2_PRESETS[spec.integration];
  if (c.tokenUrl === undefined && !preset)
    out.push({
      pointer: '/spec/config/tokenUrl',
      message: `an ${OAUTH2} connection needs the provider's token endpoint (or use a preset: ${Object.keys(OAUTH2_PRESETS).join(', ')})`,
    });
  if (c.tokenUrl !== undefined) out.push(...urlIssue(c.tokenUrl, '/spec/config/tokenUrl', false));
  if (c.authUrl !== undefined) out.push(...urlIssue(c.authUrl, '/spec/config/authUrl', false));
  if (c.clientAuth !== undefined && !(CLIENT_AUTH_METHODS as readonly unknown[]).includes(c.clientAuth))
    out.push({
      pointer: '/spec/config/clientAuth',
      message: `must be one of ${CLIENT_AUTH_METHODS.join(', ')}`,
    });
  if (c.scopes !== undefined && !(typeof c.scopes === 'string' || isStringArray(c.scopes)))
    out.push({
      pointer: '/spec/config/scopes',
      message: 'must be a space-separated string or a list of strings',
    });
  if (c.apiDomains !== undefined) {
    if (!isStringArray(c.apiDomains))
      out.push({ pointer: '/spec/config/apiDomains', message: 'must be a list of domain names' });
    else
      c.apiDomains.forEach((d, i) => {
        if (!DOMAIN.test(d))
          out.push({
            pointer: `/spec/config/apiDomains/${i}`,
            message:
              'must be a domain name or *.domain: the access token is sent to these hosts only, never to every destination',
          });
      });
  }
  const secret = (spec.secret ?? {}) as Record<string, unknown>;
  if (!secret[CLIENT_ID])
    out.push({
      pointer: `/spec/secret/${CLIENT_ID}`,
      message: "is required: the OAuth application's client id",
    });
  if (!secret[REFRESH_TOKEN])
    out.push({
      pointer: `/spec/secret/${REFRESH_TOKEN}`,
      message: `${REFRESH_FAILED}: the token response of the authorization held no refresh_token, which a provider gives only to a request with offline access; ${RECONNECT_ADVICE}`,
    });
  return out;
}

const isStringArray = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'string');
