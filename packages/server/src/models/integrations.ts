// The integration kinds Berth knows (an integration connection's `spec.integration`), with the config and secret
// fields each reads: a read-only catalog served at `GET /v0/integrations/{name}` in the service SDK's `Integration`
// shape. An LLM provider's entry comes from its adapter (models/providers/), so the catalog says what the gateway
// does; kinds added later (OAuth-connected services, say) add an entry here.
import { INTEGRATIONS } from '../kinds/integration-connection.js';
import { providerFor } from './providers/index.js';

export interface IntegrationField {
  name: string;
  required: boolean;
  description: string;
  default?: string;
}

export interface IntegrationEntry {
  name: string;
  /** Free-form facts in the service's shape (string values only). */
  additionalInfos: Record<string, string>;
  /** What Berth calls on the integration's behalf: the model gateway's endpoints of a provider. */
  endpoints: Record<string, { method: string; path?: string }>;
  headers: Record<string, string>;
  params: Record<string, string>;
  organizations: never[];
  repositories: never[];
  /** `spec.config` fields the integration reads. */
  config: IntegrationField[];
  /** `spec.secret` fields (stored encrypted, never answered). */
  secrets: IntegrationField[];
}

const baseUrlField = (def: string | undefined): IntegrationField => ({
  name: 'baseUrl',
  required: def === undefined,
  description: def ? 'overrides the provider address (self-hosted or test providers)' : 'the server address',
  ...(def ? { default: def } : {}),
});

/** Config fields beyond baseUrl that an adapter reads (models/providers/). */
const EXTRA_CONFIG: Record<string, IntegrationField[]> = {
  openai: [
    { name: 'organization', required: false, description: 'sent as OpenAI-Organization' },
    { name: 'project', required: false, description: 'sent as OpenAI-Project' },
  ],
  anthropic: [{ name: 'apiVersion', required: false, description: 'sent as anthropic-version' }],
  'azure-openai': [
    { name: 'apiVersion', required: false, description: 'the api-version query parameter' },
    { name: 'deployment', required: false, description: 'the deployment a call naming no model reaches' },
  ],
};

function entryOf(name: string): IntegrationEntry {
  const provider = providerFor(name);
  if (!provider)
    return {
      name,
      additionalInfos: {
        kind: 'http-api',
        use: 'its config and secrets reach the agents and functions naming the connection as BL_CONNECTION_* envs',
      },
      endpoints: {},
      headers: {},
      params: {},
      organizations: [],
      repositories: [],
      config: [
        { name: 'baseUrl', required: false, description: 'the API address, for the workload to call' },
      ],
      secrets: [{ name: 'apiKey', required: false, description: 'the credential, for the workload to send' }],
    };
  const endpoints: IntegrationEntry['endpoints'] = {
    chat: { method: 'POST', path: '/v1/chat/completions' },
  };
  if (provider.modelsPath) endpoints.models = { method: 'GET', path: provider.modelsPath };
  return {
    name,
    additionalInfos: {
      kind: 'llm-provider',
      wire: provider.wire,
      chat: provider.chat.mode === 'native' ? 'native' : `translated from the ${provider.chat.mode} API`,
    },
    endpoints,
    headers: {},
    params: {},
    organizations: [],
    repositories: [],
    config: [baseUrlField(provider.defaultBaseUrl), ...(EXTRA_CONFIG[name] ?? [])],
    secrets: [
      {
        name: 'apiKey',
        required: !provider.keyOptional,
        description: 'the provider key; the gateway sends it, no caller ever sees it',
      },
    ],
  };
}

/** Every integration Berth knows, by name. */
export const INTEGRATION_CATALOG: ReadonlyMap<string, IntegrationEntry> = new Map(
  INTEGRATIONS.map((n) => [n, entryOf(n)]),
);
