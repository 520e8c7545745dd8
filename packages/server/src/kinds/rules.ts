// Validation rules several kinds share: regions, references to other objects, scale bounds, triggers.
// Each returns FieldIssues with pointers into the whole body, so the 422 names the offending field.
import { Cron } from 'croner';
import { randomBytes } from 'node:crypto';
import type { FieldIssue } from '../errors.js';
import { DURATION_PATTERN } from './common.js';
import { parseImageReference } from './image-reference.js';
import type { ValidationContext } from './types.js';

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Milliseconds of a duration such as `30s`, `15m`, `24h`, `7d`, `1w`; undefined when malformed. */
export function durationMs(s: string | undefined): number | undefined {
  if (typeof s !== 'string') return undefined;
  const m = new RegExp(DURATION_PATTERN).exec(s);
  return m ? Number(s.slice(0, -1)) * UNIT_MS[m[1]] : undefined;
}

/** An ISO 8601 date or date-time the platform's Date understands. */
export const isIsoDate = (s: unknown) =>
  typeof s === 'string' &&
  /^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(s) &&
  !Number.isNaN(Date.parse(s));

/**
 * A malformed image name is refused at once; a well-formed one that cannot be had fails later (a sandbox's start,
 * a workload's build), since an image may be pulled or imported after the write.
 */
export function imageIssues(image: string | undefined): FieldIssue[] {
  if (image === undefined) return [];
  const p = parseImageReference(image);
  return p.ok ? [] : [{ pointer: '/spec/runtime/image', message: p.reason }];
}

/** An unknown region is a 422 listing the known ones (DESIGN.md §4). */
export function regionIssues(
  region: string | undefined,
  ctx: ValidationContext,
  pointer = '/spec/region',
  nodeRegions?: ReadonlySet<string>,
): FieldIssue[] {
  if (region === undefined || ctx.regions.includes(region) || nodeRegions?.has(region)) return [];
  const known = [...new Set([...ctx.regions, ...(nodeRegions ?? [])])];
  return [
    {
      pointer,
      message: `region ${JSON.stringify(region)} is not served here; known regions: ${known.join(', ')} (settings BERTH_REGIONS and BERTH_REGION_ALIASES${nodeRegions ? ' of the servers of the cluster' : ''})`,
    },
  ];
}

/**
 * Names of other objects a spec refers to must exist. Only names that are new since the previous spec are
 * checked, so an object whose referent was deleted later can still be updated (its controller reports it).
 */
export async function referenceIssues(
  ctx: ValidationContext,
  kind: string,
  names: (string | undefined)[] | undefined,
  prevNames: (string | undefined)[] | undefined,
  pointer: (i: number) => string,
): Promise<FieldIssue[]> {
  const before = new Set(prevNames ?? []);
  const out: FieldIssue[] = [];
  for (const [i, n] of (names ?? []).entries()) {
    if (n === undefined || before.has(n)) continue;
    if (!(await ctx.exists(kind, n)))
      out.push({ pointer: pointer(i), message: `${kind} ${JSON.stringify(n)} does not exist` });
  }
  return out;
}

/**
 * A `maxToken` policy counts model tokens; an agent, function or job has none to count, so referring to one that
 * applies to the kind is refused rather than kept as a limit that never holds.
 */
export async function tokenPolicyIssues(
  ctx: ValidationContext,
  names: string[] | undefined,
  resourceType: string,
): Promise<FieldIssue[]> {
  const out: FieldIssue[] = [];
  for (const [i, n] of (names ?? []).entries()) {
    const p = await ctx.specOf?.('Policy', n);
    if (p?.type !== 'maxToken' || (p.resourceTypes && !p.resourceTypes.includes(resourceType))) continue;
    out.push({
      pointer: `/spec/policies/${i}`,
      message: `policy ${JSON.stringify(n)} is a maxToken policy: token limits apply to model endpoints only and cannot limit a ${resourceType}; remove it here, or set its resourceTypes to leave out ${resourceType}`,
    });
  }
  return out;
}

/** A schedule trigger's expression must parse (UTC cron, five or six fields) or nothing would ever fire. */
export function scheduleIssues(triggers: any[] | undefined): FieldIssue[] {
  return (triggers ?? []).flatMap((t, i) => {
    if (!isScheduleTrigger(t)) return [];
    const expr = t.configuration?.schedule;
    const pointer = `/spec/triggers/${i}/configuration/schedule`;
    if (!isCron(expr)) return []; // triggerIssues names that one
    try {
      new Cron(expr, { timezone: 'UTC', paused: true });
      return [];
    } catch (err) {
      return [{ pointer, message: `not a cron expression: ${(err as Error).message}` }];
    }
  });
}

/** minScale ≤ maxScale of a scaled runtime (agent, function). */
export function scaleIssues(runtime: { minScale?: number; maxScale?: number } | undefined): FieldIssue[] {
  if (
    runtime?.minScale === undefined ||
    runtime.maxScale === undefined ||
    runtime.minScale <= runtime.maxScale
  )
    return [];
  return [{ pointer: '/spec/runtime/minScale', message: `must not exceed maxScale (${runtime.maxScale})` }];
}

const CRON_FIELD = /^[0-9A-Za-z*?LW#,/-]+$/;
const CRON_MACROS = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];

/** Five fields (or six, with seconds first), or a macro such as `@hourly`. */
export function isCron(s: unknown): boolean {
  if (typeof s !== 'string') return false;
  const t = s.trim();
  if (CRON_MACROS.includes(t)) return true;
  const fields = t.split(/\s+/);
  return (fields.length === 5 || fields.length === 6) && fields.every((f) => CRON_FIELD.test(f));
}

export const isScheduleTrigger = (t: { type?: string }) => t.type === 'schedule' || t.type === 'cron';

/**
 * A schedule trigger needs a cron expression; an HTTP trigger's path starts with `/` unless `pathRule` is false
 * (agents and functions check theirs in trigger-path.ts, where the service's `my/path` form is accepted).
 */
export function triggerIssues(triggers: any[] | undefined, pathRule = true): FieldIssue[] {
  const out: FieldIssue[] = [];
  const ids = new Set<string>();
  (triggers ?? []).forEach((t, i) => {
    const at = `/spec/triggers/${i}`;
    if (t.id !== undefined) {
      if (ids.has(t.id))
        out.push({ pointer: `${at}/id`, message: `duplicates the id of an earlier trigger` });
      ids.add(t.id);
    }
    const c = t.configuration ?? {};
    if (isScheduleTrigger(t) && !isCron(c.schedule))
      out.push({
        pointer: `${at}/configuration/schedule`,
        message: 'a schedule trigger needs a cron expression such as "*/5 * * * *"',
      });
    if (pathRule && c.path !== undefined && !String(c.path).startsWith('/'))
      out.push({ pointer: `${at}/configuration/path`, message: 'must start with /' });
  });
  return out;
}

/**
 * Trigger defaults: an id (the stable identity a redacted `callbackSecret` is matched by on a replace),
 * `enabled`, and a Standard Webhooks signing secret when a callback URL is set.
 */
export function triggerDefaults(triggers: any[] | undefined) {
  for (const t of triggers ?? []) {
    t.id ??= `trigger-${randomBytes(4).toString('hex')}`;
    t.enabled ??= true;
    if (t.configuration?.callbackUrl && !t.configuration.callbackSecret)
      t.configuration.callbackSecret = `whsec_${randomBytes(24).toString('base64')}`;
  }
}

/** Env names must be unique: the runtime would silently keep only one. */
export function envIssues(envs: { name: string }[] | undefined, pointer: string): FieldIssue[] {
  const seen = new Set<string>();
  const out: FieldIssue[] = [];
  (envs ?? []).forEach((e, i) => {
    if (seen.has(e.name))
      out.push({ pointer: `${pointer}/${i}/name`, message: `duplicates env ${JSON.stringify(e.name)}` });
    seen.add(e.name);
  });
  return out;
}
