// Integration connection (§2.13): settings and encrypted credentials for an external service.
import { Type } from './typebox.js';
import type { FieldIssue } from '../errors.js';
import { literals, opt, PROVIDER_TYPES, StringMap } from './common.js';
import { OAUTH2_INTEGRATIONS, oauth2Issues } from './oauth2.js';
import type { KindDescriptor } from './types.js';

/** Provider types (a model's `runtime.type`), a generic HTTP API, and OAuth2 grants (kinds/oauth2.ts). */
export const INTEGRATIONS = [...PROVIDER_TYPES, 'http-api', ...OAUTH2_INTEGRATIONS] as const;

/** Record kind (not an envelope) holding an OAuth2 connection's sealed tokens, removed with the connection. */
export const CONNECTION_TOKEN_KIND = 'IntegrationConnectionToken';

/** What an OAuth2 connection's tokens are doing, written by the server only; never a token itself. */
export const TokenState = Type.Object({
  /** VALID: an access token is held; FAILED: the grant cannot be refreshed (§7); PENDING: none asked for yet. */
  state: literals(['PENDING', 'VALID', 'FAILED'] as const),
  /** When the access token held expires (ISO 8601). */
  validUntil: opt(Type.String()),
  /** When the last successful refresh happened. */
  lastRefreshAt: opt(Type.String()),
  /** The last refresh's failure, as the provider said it (and what to do), cleared by a success. */
  lastError: opt(Type.String()),
  /** Scopes the provider granted with the last access token. */
  scope: opt(Type.String()),
  /** Times the provider rotated the refresh token (each new one is stored sealed). */
  rotations: opt(Type.Integer()),
});

export const IntegrationConnectionSpec = Type.Object({
  /** Non-secret settings; `baseUrl` overrides a provider's default address. */
  config: opt(Type.Record(Type.String(), Type.Unknown())),
  integration: literals(INTEGRATIONS),
  sandbox: opt(Type.Boolean()),
  /** Credentials by name; every value is stored encrypted and redacted in responses. */
  secret: opt(StringMap),
});

/**
 * A base URL is a prefix every provider path is appended to: a query or fragment would swallow the path (`#` makes
 * every call go to the base itself), and credentials would sit in a field any reader sees.
 */
function configIssues(config: Record<string, unknown> | undefined): FieldIssue[] {
  const b = config?.baseUrl;
  if (b === undefined) return [];
  const issue = (message: string) => [{ pointer: '/spec/config/baseUrl', message }];
  let u: URL;
  try {
    u = new URL(String(b));
  } catch {
    return issue('must be an http or https URL');
  }
  if (typeof b !== 'string' || !['http:', 'https:'].includes(u.protocol))
    return issue('must be an http or https URL');
  if (u.username || u.password)
    return issue('must not carry credentials: put the key in spec.secret, where it is encrypted');
  if (b.includes('?') || b.includes('#'))
    return issue('must not carry a query or a fragment: provider paths are appended to it');
  return [];
}

export const integrationConnection = {
  kind: 'IntegrationConnection',
  plural: 'integrationconnections',
  aliases: ['integrationconnection', 'connections', 'connection', 'ic'],
  path: '/integrations/connections',
  nameParam: 'connectionName',
  description: 'Stored connection to an external service holding settings and encrypted credentials.',
  spec: IntegrationConnectionSpec,
  // §2.13 and the service's SDK show no status or events for connections.
  hasStatus: false,
  readOnly: { token: TokenState },
  ownedRecords: [CONNECTION_TOKEN_KIND],
  writeRole: 'member',
  // The key goes wherever the integration and its config say (baseUrl, an OAuth2 tokenUrl, and the fields a provider
  // builds its address from): a member changing them keeps no stored key it cannot read.
  secrets: [{ path: ['secret', '*'], sentTo: { at: 0, fields: ['integration', 'config'] } }],
  // Berth itself sends requests to these: a provider's base URL, and an OAuth2 provider's token endpoint (authUrl is
  // where the user's browser goes, never Berth).
  outboundTargets: (spec) =>
    (['baseUrl', 'tokenUrl'] as const).flatMap((f) =>
      typeof spec?.config?.[f] === 'string' ? [{ pointer: `/spec/config/${f}`, url: spec.config[f] }] : [],
    ),
  validate(next) {
    return [...configIssues(next.spec.config), ...oauth2Issues(next.spec)];
  },
} satisfies KindDescriptor;
