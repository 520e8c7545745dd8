// Model endpoint (§2.3): a gateway to an external LLM provider, with the credentials of an integration connection.
import { Type } from './typebox.js';
import { literals, NamedType, NameList, opt, PROVIDER_TYPES } from './common.js';
import { referenceIssues } from './rules.js';
import type { KindDescriptor } from './types.js';

export const ModelSpec = Type.Object({
  enabled: opt(Type.Boolean()),
  flavors: opt(Type.Array(NamedType)),
  integrationConnections: opt(NameList),
  policies: opt(NameList),
  runtime: Type.Object({
    endpointName: opt(Type.String()),
    /**
     * The provider's model name, e.g. `gpt-4o-mini`: the only model calls through the endpoint reach (absent:
     * only calls naming none, served by the provider's default). See decision 039.
     */
    model: opt(Type.String({ minLength: 1 })),
    organization: opt(Type.String()),
    type: literals(PROVIDER_TYPES),
  }),
  sandbox: opt(Type.Boolean()),
});

export const model = {
  kind: 'Model',
  plural: 'models',
  aliases: ['model', 'mdl'],
  path: '/models',
  nameParam: 'modelName',
  description: 'Gateway to an external LLM provider API with access control, credentials and usage tracking.',
  spec: ModelSpec,
  hasStatus: true,
  defaults(spec) {
    spec.enabled ??= true;
  },
  async validate(next, prev, ctx) {
    const s = next.spec;
    const p = prev?.spec;
    return [
      ...(await referenceIssues(
        ctx,
        'IntegrationConnection',
        s.integrationConnections,
        p?.integrationConnections,
        (i) => `/spec/integrationConnections/${i}`,
      )),
      ...(await referenceIssues(ctx, 'Policy', s.policies, p?.policies, (i) => `/spec/policies/${i}`)),
    ];
  },
} satisfies KindDescriptor;
