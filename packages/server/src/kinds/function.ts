// Function (§4.1 POST /functions): an MCP server, built from code or bound to integration connections,
// reachable over the streamable HTTP transport at run_url/<ws>/functions/<name>/mcp.
import { Type } from '@sinclair/typebox';
import { callbackSecrets, ScaledRuntime, scaledDefaults, WORKLOAD_READ_ONLY } from './agent.js';
import { envSecrets, literals, NameList, opt, Revision, Trigger } from './common.js';
import {
  envIssues,
  imageIssues,
  referenceIssues,
  regionIssues,
  scaleIssues,
  tokenPolicyIssues,
  triggerIssues,
} from './rules.js';
import { triggerPathIssues } from './trigger-path.js';
import type { KindDescriptor } from './types.js';

export const FUNCTION_TYPES = ['mcp'] as const;
export const FUNCTION_MEMORY_MB = 2048;

export const FunctionSpec = Type.Object({
  type: opt(literals(FUNCTION_TYPES)),
  enabled: opt(Type.Boolean()),
  integrationConnections: opt(NameList),
  policies: opt(NameList),
  public: opt(Type.Boolean()),
  region: opt(Type.String()),
  revision: opt(Revision),
  runtime: opt(
    Type.Object({
      /** How the server is provided, e.g. the integration it wraps; free-form like the service's. */
      type: opt(Type.String({ minLength: 1, maxLength: 63 })),
      ...ScaledRuntime,
    }),
  ),
  triggers: opt(Type.Array(Trigger)),
});

export const fn = {
  kind: 'Function',
  plural: 'functions',
  aliases: ['function', 'fn', 'mcp', 'mcps'],
  path: '/functions',
  nameParam: 'functionName',
  description: 'MCP server reachable over the streamable HTTP transport.',
  spec: FunctionSpec,
  hasStatus: true,
  readOnly: WORKLOAD_READ_ONLY,
  secrets: [envSecrets('runtime', 'envs'), callbackSecrets],
  defaults(spec, { regions }) {
    spec.type ??= 'mcp';
    scaledDefaults(spec, regions, FUNCTION_MEMORY_MB);
  },
  async validate(next, prev, ctx) {
    const s = next.spec;
    const p = prev?.spec;
    return [
      ...regionIssues(s.region, ctx),
      ...scaleIssues(s.runtime),
      ...imageIssues(s.runtime?.image),
      ...envIssues(s.runtime?.envs, '/spec/runtime/envs'),
      ...triggerIssues(s.triggers, false),
      ...triggerPathIssues('Function', next.metadata?.name, s.triggers),
      ...(await referenceIssues(
        ctx,
        'IntegrationConnection',
        s.integrationConnections,
        p?.integrationConnections,
        (i) => `/spec/integrationConnections/${i}`,
      )),
      ...(await referenceIssues(ctx, 'Policy', s.policies, p?.policies, (i) => `/spec/policies/${i}`)),
      ...(await tokenPolicyIssues(ctx, s.policies, 'function')),
    ];
  },
} satisfies KindDescriptor;
