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

function configIssues(config: Record<string, unknown> | undefined): FieldIssue[] {
  const b = config?.baseUrl;
  if (b === undefined) return [];
  let ok = false;
  try {
    ok = typeof b === 'string' && ['http:', 'https:'].includes(new URL(b).protocol);
  } catch {}
  return ok ? [] : [{ pointer: '/spec/config/baseUrl', message: 'must be an http or https URL' }];
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
  secrets: [{ path: ['secret', '*'] }],
  validate(next) {
    return configIssues(next.spec.config);
  },
} satisfies KindDescriptor;
