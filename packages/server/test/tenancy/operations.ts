// Requests built from the OpenAPI document alone: every operation, its path parameters filled with tenant A's
// values by a few general rules (parameter name, path shape), and a minimal valid body from its request schema
// (the kinds' samples for a kind's own input, else the schema's required fields).
import fc from 'fast-check';
import { SAMPLES } from '../../src/kinds/samples.js';
import type { World } from './world.js';

export interface Operation {
  method: string;
  /** As in the document, e.g. /sandboxes/{sandboxName}/schedules/{scheduleId}. */
  path: string;
  operationId: string;
  /** x-berth-role: the least role in the addressed workspace; undefined when it acts in none. */
  role?: 'viewer' | 'member' | 'admin';
  params: string[];
  query: string[];
  body?: { type: string; schema: any };
  public: boolean;
}

const METHODS = ['get', 'post', 'put', 'delete'];

export function operationsOf(doc: any): Operation[] {
  const out: Operation[] = [];
  for (const [path, ops] of Object.entries<any>(doc.paths))
    for (const method of METHODS) {
      const op = ops[method];
      if (!op) continue;
      const params = (op.parameters ?? []).map((p: any) => (p.$ref ? deref(doc, p.$ref) : p));
      const content = op.requestBody?.content ?? {};
      const type = Object.keys(content)[0];
      out.push({
        method: method.toUpperCase(),
        path,
        operationId: op.operationId,
        role: op['x-berth-role'],
        params: params.filter((p: any) => p.in === 'path').map((p: any) => p.name),
        query: params.filter((p: any) => p.in === 'query').map((p: any) => p.name),
        body: type ? { type, schema: content[type].schema } : undefined,
        public: Array.isArray(op.security) && op.security.length === 0,
      });
    }
  return out;
}

const deref = (doc: any, ref: string) =>
  ref
    .split('/')
    .slice(1)
    .reduce((o: any, k: string) => o[k], doc);

/**
 * Which of A's values a path parameter takes. The parameter's own name first; a `subject` under `/invitations/`
 * is the invitee, elsewhere A's member; an `imageName` after a `{resourceType}` is the rest of A's image's name. Undefined when no rule applies: the test then fails, naming it.
 */
export function valuesFor(param: string, path: string, w: World): string[] | undefined {
  if (param === 'subject' && path.includes('/invitations/')) return w.values.invitee;
  // The service's image paths name the image in two parts: A's name without its first part (world.ts).
  if (param === 'imageName' && path.includes('{resourceType}')) return w.values.typedImageName;
  return w.values[param];
}

/** Every URL an operation takes with A's values (one per combination), percent-encoded. */
export function urlsOf(op: Operation, w: World): string[] | undefined {
  let urls = [op.path];
  for (const p of op.params) {
    const vs = valuesFor(p, op.path, w);
    if (!vs?.length) return undefined;
    urls = urls.flatMap((u) => vs.map((v) => u.replace(`{${p}}`, encodeURIComponent(v))));
  }
  return urls;
}

/** Query parameters that widen what an answer could show: A's labels, and secrets where offered. */
export function queryOf(op: Operation, w: World, opts: { secrets: boolean; labels?: boolean }): string {
  const q = new URLSearchParams();
  if (opts.labels !== false && op.query.includes('labels')) q.set('labels', w.labelSelector);
  if (opts.secrets && op.query.includes('show_secrets')) q.set('show_secrets', 'true');
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** A minimal value the schema accepts: required fields only, the first of enums and unions. */
export function minimalValue(schema: any, doc: any, depth = 0): unknown {
  if (!schema || depth > 12) return undefined;
  const next = (s: any) => minimalValue(s, doc, depth + 1);
  if (schema.$ref) {
    const name = schema.$ref.split('/').pop() as string;
    const kind = name.endsWith('Input') ? name.slice(0, -'Input'.length) : '';
    if (SAMPLES[kind]) return structuredClone(SAMPLES[kind].valid);
    return next(deref(doc, schema.$ref));
  }
  if ('const' in schema) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  const alt = schema.anyOf ?? schema.oneOf;
  if (alt) return next(alt[0]);
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map(next));
  switch (Array.isArray(schema.type) ? schema.type[0] : schema.type) {
    case 'object':
      return Object.fromEntries(
        (schema.required ?? []).map((k: string) => [k, next(schema.properties?.[k])]),
      );
    case 'array':
      return schema.minItems ? [next(schema.items)] : [];
    case 'integer':
    case 'number':
      return Math.max(schema.minimum ?? 1, 1);
    case 'boolean':
      return false;
    case 'string':
      if (schema.format === 'date-time') return new Date(Date.now() + 86_400_000).toISOString();
      if (schema.format === 'binary') return 'PK';
      if (schema.pattern)
        return fc.sample(fc.stringMatching(new RegExp(schema.pattern)), { numRuns: 1, seed: 42 })[0];
      return 'x'.repeat(Math.max(schema.minLength ?? 1, 1));
    default:
      return {};
  }
}

/**
 * The body with every string field named like one of A's values (`subject`, `reference`, a spec's `image`)
 * naming A's object instead, at any depth: one body per value of such a field, so a body names A's objects
 * each way (an image by name, id and digest) as a path does.
 */
function aimedAtA(body: unknown, values: World['values']): unknown[] {
  const out: unknown[] = [];
  const fields: { key: string; parent: Record<string, unknown> }[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) {
        if (typeof x === 'string' && values[k]?.length)
          fields.push({ key: k, parent: v as Record<string, unknown> });
        else walk(x);
      }
  };
  walk(body);
  if (!fields.length) return [body];
  for (const f of fields) f.parent[f.key] = values[f.key][0];
  const [first] = fields;
  for (const v of values[first.key]) {
    first.parent[first.key] = v;
    out.push(structuredClone(body));
  }
  return out;
}

/** The bodies of requests to the operation (JSON, or a few bytes of an archive type); [undefined] for none. */
export function bodiesOf(op: Operation, doc: any, w: World): ({ body: string; type: string } | undefined)[] {
  if (!op.body) return [undefined];
  const v = minimalValue(op.body.schema, doc);
  if (op.body.type !== 'application/json')
    return [{ body: typeof v === 'string' ? v : JSON.stringify(v), type: op.body.type }];
  return aimedAtA(v ?? {}, w.values).map((b) => ({ body: JSON.stringify(b), type: op.body?.type ?? '' }));
}
