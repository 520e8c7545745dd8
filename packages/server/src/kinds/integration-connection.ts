// Integration connection (§2.13): settings and encrypted credentials for an external service.
import { Type } from '@sinclair/typebox';
import type { FieldIssue } from '../errors.js';
import { literals, opt, PROVIDER_TYPES, StringMap } from './common.js';
import type { KindDescriptor } from './types.js';

/** Provider types (a model's `runtime.type`) plus a generic HTTP API; later integrations extend this list. */
export const INTEGRATIONS = [...PROVIDER_TYPES, 'http-api'] as const;

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
  writeRole: 'member',
  // The key goes wherever the integration and its config say (baseUrl, and the fields a provider builds its
  // address from): a member changing them keeps no stored key it cannot read.
  secrets: [{ path: ['secret', '*'], sentTo: { at: 0, fields: ['integration', 'config'] } }],
  outboundTargets: (spec) =>
    typeof spec?.config?.baseUrl === 'string'
      ? [{ pointer: '/spec/config/baseUrl', url: spec.config.baseUrl }]
      : [],
  validate(next) {
    return configIssues(next.spec.config);
  },
} satisfies KindDescriptor;
