// Function (§4.1 POST /functions): an MCP server, built from code or bound to integration connections,
// reachable over the streamable HTTP transport at run_url/<ws>/functions/<name>/mcp.
import { Type } from './typebox.js';
import type { FieldIssue } from '../errors.js';
import {
  callbackSecrets,
  ScaledRuntime,
  scaledDefaults,
  WORKLOAD_READ_ONLY,
  workloadTargets,
  workloadReferenceIssues,
  workloadVolumeIssues,
} from './agent.js';
import { envSecrets, literals, NameList, opt, Revision, Trigger, VolumeMount } from './common.js';
import { envIssues, imageIssues, regionIssues, scaleIssues, triggerIssues } from './rules.js';
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
  /** Berth's own: volumes bound into every replica, as an agent's (the service's functions have none). */
  volumes: opt(Type.Array(VolumeMount)),
});

/**
 * Triggers an MCP server cannot have (decision 030): an `http-async` one (a request answered later by a callback is
 * not how MCP clients talk; the service has it for agents only) and a schedule (an MCP server has no entry point
 * that takes a task: each call is a JSON-RPC exchange within a session its client opened).
 */
function functionTriggerIssues(triggers: any[] | undefined): FieldIssue[] {
  const out: FieldIssue[] = [];
  (triggers ?? []).forEach((t, i) => {
    const pointer = `/spec/triggers/${i}/type`;
    if (t?.type === 'http-async')
      out.push({
        pointer,
        message:
          'http-async triggers are for agents: an MCP server answers its clients over streamable HTTP (use type "http")',
      });
    else if (t?.type === 'schedule' || t?.type === 'cron')
      out.push({
        pointer,
        message: `a function (MCP server) is called by MCP clients and cannot run on a schedule: put the ${t.type} trigger on a job or an agent that calls the server's tools`,
      });
  });
  return out;
}

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
  outboundTargets: workloadTargets,
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
      ...workloadVolumeIssues(s),
      ...imageIssues(s.runtime?.image),
      ...envIssues(s.runtime?.envs, '/spec/runtime/envs'),
      ...triggerIssues(s.triggers, false),
      ...triggerPathIssues('Function', next.metadata?.name, s.triggers),
      ...functionTriggerIssues(s.triggers),
      ...(await workloadReferenceIssues(ctx, s, p, 'function')),
    ];
  },
} satisfies KindDescriptor;
