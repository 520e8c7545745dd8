// /v0 read-outs of the model gateway: a connection's provider models, a model's usage by hour or key,
// and a maxToken policy's current consumption per window.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, type FieldIssue, notFound } from '../errors.js';
import { requireRole } from '../auth/require-role.js';
import { durationMs } from '../kinds/rules.js';
import { CONNECTION_KIND, openConnection } from './connections.js';
import type { ModelGateway } from './index.js';
import { CHAT_PATH } from './forward.js';
import { listProviderModels } from './list-models.js';
import { budgetOf, type PolicyBody } from './policies.js';
import type { Amount, Limits, WindowState } from './token-budget.js';
import type { UsageRow } from './usage-recorder.js';

/** The usage read-out covers the last day unless `from` says otherwise. */
const DEFAULT_USAGE_SPAN_MS = 24 * 3_600_000;

function timeParam(
  q: Record<string, string>,
  name: string,
  now: number,
  issues: FieldIssue[],
): number | undefined {
  const v = q[name];
  if (v === undefined || v === '') return undefined;
  const ago = durationMs(v);
  if (ago !== undefined) return now - ago;
  const t = Date.parse(v);
  if (Number.isNaN(t))
    issues.push({ pointer: `/query/${name}`, message: 'must be an ISO 8601 time or a duration such as 24h' });
  return t;
}

interface Totals {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  requests: number;
  errors: number;
  avgLatencyMs: number;
}

export function totals(rows: UsageRow[]): Totals {
  const s = { inputTokens: 0, outputTokens: 0, requests: 0, errors: 0, latency: 0 };
  for (const r of rows) {
    s.inputTokens += r.inputTokens;
    s.outputTokens += r.outputTokens;
    s.requests += r.requests;
    s.errors += r.errors;
    s.latency += r.latencyMsSum;
  }
  return {
    inputTokens: s.inputTokens,
    outputTokens: s.outputTokens,
    totalTokens: s.inputTokens + s.outputTokens,
    requests: s.requests,
    errors: s.errors,
    avgLatencyMs: s.requests ? Math.round(s.latency / s.requests) : 0,
  };
}

function group(rows: UsageRow[], by: 'hour' | 'keyId') {
  const groups = new Map<string, UsageRow[]>();
  for (const r of rows) groups.set(r[by], [...(groups.get(r[by]) ?? []), r]);
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, rs]) => ({ [by]: k, ...totals(rs) }));
}

const withTotal = (a: Amount) => ({ input: a.input, output: a.output, total: a.input + a.output });

export function windowView(w: WindowState) {
  const held = { input: w.used.input + w.reserved.input, output: w.used.output + w.reserved.output };
  const remaining: Limits = {};
  if (w.limits.input !== undefined) remaining.input = Math.max(0, w.limits.input - held.input);
  if (w.limits.output !== undefined) remaining.output = Math.max(0, w.limits.output - held.output);
  if (w.limits.total !== undefined) remaining.total = Math.max(0, w.limits.total - held.input - held.output);
  return {
    policy: w.policy,
    granularity: w.granularity,
    step: w.step,
    start: new Date(w.start).toISOString(),
    end: new Date(w.end).toISOString(),
    limits: w.limits,
    used: withTotal(w.used),
    reserved: withTotal(w.reserved),
    remaining,
  };
}

export function registerModelRoutes(app: FastifyInstance, gw: ModelGateway) {
  const { resources } = gw;

  /** The connection of the path opened for a provider call, or 404 (absent) / 422 (it cannot serve). */
  async function opened(req: FastifyRequest) {
    const a = requireRole(req, 'viewer');
    const { connectionName } = req.params as Record<string, string>;
    const o = await openConnection(resources, a.workspace, connectionName);
    if (o.ok) return o;
    if (!(await resources.get(resources.kind(CONNECTION_KIND), a.workspace, [], connectionName)))
      throw notFound(`IntegrationConnection ${JSON.stringify(connectionName)}`);
    throw new ApiError('VALIDATION_FAILED', o.reason, { errors: [{ pointer: '/spec', message: o.reason }] });
  }

  app.get('/v0/integrations/connections/:connectionName/models', async (req) =>
    listProviderModels(await opened(req), gw.agent),
  );

  // One model of the provider's list: the provider has no lookup of one model common to all of them.
  app.get('/v0/integrations/connections/:connectionName/models/:modelId', async (req) => {
    const { modelId, connectionName } = req.params as Record<string, string>;
    const found = (await listProviderModels(await opened(req), gw.agent)).find((m) => m.id === modelId);
    if (!found)
      throw notFound(
        `model ${JSON.stringify(modelId)} of integration connection ${JSON.stringify(connectionName)}`,
      );
    return found;
  });

  // Where the gateway sends a model endpoint's calls over this connection (no provider call, no secret).
  app.get('/v0/integrations/connections/:connectionName/endpointConfigurations', async (req) => {
    const { provider, connection } = await opened(req);
    const endpoints: Record<string, { method: string; path: string; url: string }> = {
      chat: {
        method: 'POST',
        path: CHAT_PATH,
        url: provider.url(connection, provider.chat.mode === 'anthropic' ? '/v1/messages' : CHAT_PATH, ''),
      },
    };
    if (provider.modelsPath)
      endpoints.models = {
        method: 'GET',
        path: provider.modelsPath,
        url: provider.url(connection, provider.modelsPath, ''),
      };
    return {
      integration: connection.integration,
      wire: provider.wire,
      baseUrl: connection.baseUrl,
      endpoints,
    };
  });

  app.get('/v0/models/:modelName/usage', async (req: FastifyRequest) => {
    const a = requireRole(req, 'viewer');
    const { modelName } = req.params as Record<string, string>;
    const q = (req.query ?? {}) as Record<string, string>;
    const now = gw.now();
    const issues: FieldIssue[] = [];
    const from = timeParam(q, 'from', now, issues) ?? now - DEFAULT_USAGE_SPAN_MS;
    const to = timeParam(q, 'to', now, issues) ?? now + 1;
    const by = q.groupBy ?? 'hour';
    if (by !== 'hour' && by !== 'key')
      issues.push({ pointer: '/query/groupBy', message: 'must be hour or key' });
    if (issues.length)
      throw new ApiError('MALFORMED_REQUEST', issues.map((i) => `${i.pointer}: ${i.message}`).join('; '), {
        errors: issues,
      });
    const rows = await gw.recorder.rows(a.workspace, modelName, from, to);
    if (!rows.length && !(await resources.get(resources.kind('Model'), a.workspace, [], modelName)))
      throw notFound(`Model ${JSON.stringify(modelName)}`);
    return group(rows, by === 'key' ? 'keyId' : 'hour');
  });

  app.get('/v0/policies/:policyName/usages', async (req) => {
    const a = requireRole(req, 'viewer');
    const { policyName } = req.params as Record<string, string>;
    const p = await resources.mustGet(resources.kind('Policy'), a.workspace, [], policyName);
    const budget = budgetOf(a.workspace, p.body as PolicyBody);
    return budget ? (await gw.budget.snapshot(budget)).map(windowView) : [];
  });
}
