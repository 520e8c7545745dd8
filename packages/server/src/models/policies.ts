// What a model's attached policies mean: `maxToken` policies become token budgets, `location` policies
// decide whether this server's regions may serve the model. Pure functions over stored policy bodies.
import type { BudgetPolicy, Granularity, Limits } from './token-budget.js';

export interface PolicyBody {
  metadata: { name: string };
  spec: {
    type: string;
    resourceTypes?: string[];
    locations?: { name: string; type?: string }[];
    maxTokens?: {
      granularity?: Granularity;
      input?: number;
      output?: number;
      total?: number;
      ratioInputOverOutput?: number;
      step?: number;
    };
  };
}

/** A policy applies to a resource type (model, agent, function, job, sandbox) unless its resourceTypes leave it out. */
export const appliesTo = (p: PolicyBody, resourceType: string) =>
  !p.spec.resourceTypes || p.spec.resourceTypes.includes(resourceType);

/** A policy applies to models unless its resourceTypes leave them out. */
export const appliesToModels = (p: PolicyBody) => appliesTo(p, 'model');

/** The prefix of every refusal a policy causes: a FAILED event starting with it clears once the policies allow. */
export const POLICY_DENIED = 'POLICY_DENIED';

/**
 * The budget of a `maxToken` policy. `ratioInputOverOutput` derives the missing one of input/output from
 * the other (input = output × ratio), so "100k output per hour, ratio 4" also caps input at 400k.
 */
export function budgetOf(workspace: string, p: PolicyBody): BudgetPolicy | undefined {
  const m = p.spec.maxTokens;
  if (p.spec.type !== 'maxToken' || !m || !appliesToModels(p)) return undefined;
  const limits: Limits = {};
  if (m.input !== undefined) limits.input = m.input;
  if (m.output !== undefined) limits.output = m.output;
  if (m.total !== undefined) limits.total = m.total;
  const ratio = m.ratioInputOverOutput;
  if (ratio !== undefined && ratio > 0) {
    if (limits.input === undefined && limits.output !== undefined)
      limits.input = Math.floor(limits.output * ratio);
    else if (limits.output === undefined && limits.input !== undefined)
      limits.output = Math.floor(limits.input / ratio);
  }
  if (limits.input === undefined && limits.output === undefined && limits.total === undefined)
    return undefined;
  return {
    id: `${workspace}\u0000${p.metadata.name}`,
    workspace,
    name: p.metadata.name,
    granularity: m.granularity ?? 'hour',
    step: m.step ?? 1,
    limits,
  };
}

/**
 * A `location` policy lists where a model may be served. Berth serves from its configured regions, so the
 * policy denies unless one of its locations names one of them (a location's `type` may be `region` or
 * absent; countries and continents cannot be mapped to a self-hosted region and so do not match).
 * Returns the denial message, or undefined when every location policy allows.
 */
export function locationDenial(
  policies: PolicyBody[],
  regions: string[],
  resourceType = 'model',
): string | undefined {
  for (const p of policies) {
    if (p.spec.type !== 'location' || !appliesTo(p, resourceType)) continue;
    const allowed = (p.spec.locations ?? [])
      .filter((l) => l.type === undefined || l.type === 'region')
      .map((l) => l.name);
    if (!allowed.some((l) => regions.includes(l)))
      return `${POLICY_DENIED}: location policy ${JSON.stringify(p.metadata.name)} allows ${
        (p.spec.locations ?? []).map((l) => l.name).join(', ') || 'no location'
      }; this server serves ${regions.join(', ')}`;
  }
  return undefined;
}
