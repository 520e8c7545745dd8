// Policy (§2.6): rules on how deployments are made and served. Responses carry metadata and spec only.
import { Type } from './typebox.js';
import type { FieldIssue } from '../errors.js';
import { NamedType, opt } from './common.js';
import type { KindDescriptor } from './types.js';

export const POLICY_TYPES = ['location', 'flavor', 'maxToken'] as const;
export const RESOURCE_TYPES = ['model', 'agent', 'function', 'sandbox', 'job'] as const;
export const GRANULARITIES = ['minute', 'hour', 'day', 'month'] as const;

/**
 * The one flavor Berth runs agents, functions, jobs and sandboxes on: the host's CPUs (no GPUs are scheduled).
 * A flavor policy that leaves it out could let nothing run, so one that applies to those kinds must list it.
 */
export const BERTH_FLAVOR = { name: 'cpu', type: 'cpu' } as const;
/** The resource types that run on Berth's flavor (models are served by their providers). */
export const FLAVORED_TYPES = ['agent', 'function', 'sandbox', 'job'] as const;

/** Whether a flavor policy's list allows Berth's flavor (named `cpu`; a type, when given, must be `cpu` too). */
export const allowsBerthFlavor = (flavors: { name: string; type?: string }[] | undefined) =>
  (flavors ?? []).some(
    (f) => f.name === BERTH_FLAVOR.name && (f.type === undefined || f.type === BERTH_FLAVOR.type),
  );

const literals = (xs: readonly string[]) => Type.Union(xs.map((x) => Type.Literal(x)));

export const PolicySpec = Type.Object({
  type: literals(POLICY_TYPES),
  flavors: opt(Type.Array(NamedType)),
  locations: opt(Type.Array(NamedType)),
  maxTokens: opt(
    Type.Object({
      granularity: opt(literals(GRANULARITIES)),
      input: opt(Type.Integer({ minimum: 0 })),
      output: opt(Type.Integer({ minimum: 0 })),
      total: opt(Type.Integer({ minimum: 0 })),
      ratioInputOverOutput: opt(Type.Number({ minimum: 0 })),
      step: opt(Type.Integer({ minimum: 1 })),
    }),
  ),
  resourceTypes: opt(Type.Array(literals(RESOURCE_TYPES))),
  sandbox: opt(Type.Boolean()),
});

export const policy = {
  kind: 'Policy',
  plural: 'policies',
  aliases: ['policy', 'pol'],
  path: '/policies',
  nameParam: 'policyName',
  description: 'Rule controlling how a deployment is made and served (location, flavor, token limits).',
  spec: PolicySpec,
  hasStatus: false,
  defaults(spec) {
    if (spec.type === 'maxToken' && spec.maxTokens) spec.maxTokens.granularity ??= 'hour';
    spec.resourceTypes ??= [...RESOURCE_TYPES];
  },
  validate(next) {
    const issues: FieldIssue[] = [];
    const s = next.spec;
    if (s.type === 'maxToken') {
      const m = s.maxTokens;
      if (!m || (m.input === undefined && m.output === undefined && m.total === undefined))
        issues.push({
          pointer: '/spec/maxTokens',
          message: 'a maxToken policy needs input, output or total',
        });
    }
    if (s.type === 'location' && !s.locations?.length)
      issues.push({ pointer: '/spec/locations', message: 'a location policy needs at least one location' });
    if (s.type === 'flavor' && !s.flavors?.length)
      issues.push({ pointer: '/spec/flavors', message: 'a flavor policy needs at least one flavor' });
    else if (
      s.type === 'flavor' &&
      !allowsBerthFlavor(s.flavors) &&
      (s.resourceTypes ?? RESOURCE_TYPES).some((t: string) =>
        (FLAVORED_TYPES as readonly string[]).includes(t),
      )
    )
      issues.push({
        pointer: '/spec/flavors',
        message: `Berth runs agents, functions, jobs and sandboxes on one flavor, ${JSON.stringify(BERTH_FLAVOR)}; a flavor policy for them must list it (or set resourceTypes to ["model"])`,
      });
    return issues;
  },
} satisfies KindDescriptor;
