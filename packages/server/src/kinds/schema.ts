// Turns a kind descriptor into its wire schemas, and checks request bodies against them:
// unknown fields are pruned (and named), read-only fields dropped silently, the rest validated by Ajv, whose
// errors become messages in the user's words (units, formats, examples; see MESSAGE_KEY in common.ts).
import type { TObject, TSchema } from '@sinclair/typebox';
import { Type } from './typebox.js';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FieldIssue } from '../errors.js';
import { copyJson } from './json-values.js';
import { Event, MESSAGE_KEY, MetadataInput, MetadataReadOnly, Status, TIMESTAMP_MESSAGE } from './common.js';
import { unknownFieldMessage } from './field-suggestions.js';
import type { KindDescriptor } from './types.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
// verbose: errors carry the failing schema node, whose MESSAGE_KEY annotation is the message to show.
const ajv = addFormats(new Ajv({ allErrors: true, strict: false, useDefaults: false, verbose: true }));

export interface KindSchemas {
  input: TObject;
  output: TObject;
  /** Fields a client may echo back from a response (JSON pointers); dropped without a warning. */
  readOnlyPaths: Set<string>;
  /** `readOnlyPaths` split into segments once: a body check drops each of them. */
  readOnlySegments: string[][];
  check: ValidateFunction;
}

const cache = new WeakMap<KindDescriptor, KindSchemas>();

export function schemasOf(kd: KindDescriptor): KindSchemas {
  let s = cache.get(kd);
  if (s) return s;
  const metaIn = Type.Object(
    { ...MetadataInput, ...opts(kd.metadataInput) },
    { additionalProperties: false },
  );
  const input = Type.Object(
    { metadata: metaIn, spec: kd.spec, ...(kd.extraInput ?? {}) },
    { additionalProperties: false, $id: `${kd.kind}Input` },
  );
  const metaOut = Type.Object({
    ...MetadataInput,
    ...opts(kd.metadataInput),
    ...MetadataReadOnly,
    ...(kd.metadataExtra ?? {}),
  });
  const output = Type.Object(
    {
      metadata: metaOut,
      spec: kd.spec,
      ...(kd.extraInput ?? {}),
      ...(kd.hasStatus ? { status: Type.Optional(Status), events: Type.Optional(Type.Array(Event)) } : {}),
      ...Object.fromEntries(Object.entries(kd.readOnly ?? {}).map(([k, v]) => [k, Type.Optional(v)])),
    },
    { $id: kd.kind },
  );
  const readOnlyPaths = new Set<string>([
    '/status',
    '/events',
    ...Object.keys(kd.readOnly ?? {}).map((k) => `/${k}`),
    ...Object.keys({ ...MetadataReadOnly, ...(kd.metadataExtra ?? {}) }).map((k) => `/metadata/${k}`),
    ...(kd.readOnlySpec ?? []).map((p) => `/spec${p}`),
  ]);
  s = {
    input,
    output,
    readOnlyPaths,
    readOnlySegments: [...readOnlyPaths].map((p) => p.split('/').slice(1)),
    check: ajv.compile(stripIds(input)),
  };
  cache.set(kd, s);
  return s;
}

/** A kind's extra metadata inputs, each optional. */
const opts = (fields: Record<string, TSchema> | undefined) =>
  Object.fromEntries(Object.entries(fields ?? {}).map(([k, v]) => [k, Type.Optional(v)]));

function stripIds(schema: TSchema): TSchema {
  return JSON.parse(JSON.stringify(schema, (k, v) => (k === '$id' ? undefined : v)));
}

const escapePointer = (k: string) => k.replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * Removes properties the schema does not know, in place, and returns their JSON pointers.
 * Follows objects, arrays, records and unions of objects (a union keeps what any branch knows).
 */
export function prune(schema: TSchema, value: unknown, at = '', out: string[] = []): string[] {
  if (value === null || typeof value !== 'object') return out;
  const s = schema as any;
  if (Array.isArray(value)) {
    if (s.type === 'array' && s.items) value.forEach((v, i) => void prune(s.items, v, `${at}/${i}`, out));
    return out;
  }
  if (s.anyOf) {
    const objs = (s.anyOf as any[]).filter((b) => b.type === 'object');
    // A map branch (a record) accepts any key, so nothing in the value is unknown.
    if (objs.some((b) => !b.properties)) return out;
    if (objs.length) {
      const merged = {
        type: 'object',
        properties: Object.assign({}, ...objs.map((b) => b.properties ?? {})),
      };
      return prune(merged as unknown as TSchema, value, at, out);
    }
    return out;
  }
  if (s.type !== 'object') return out;
  const obj = value as Record<string, unknown>;
  if (s.properties) {
    for (const k of Object.keys(obj)) {
      // The pointer is only made for what is dropped or walked into: most fields are known scalars.
      const v = obj[k];
      if (k in s.properties) {
        if (v !== null && typeof v === 'object') prune(s.properties[k], v, `${at}/${escapePointer(k)}`, out);
        continue;
      }
      const p = `${at}/${escapePointer(k)}`;
      if (s.patternProperties || (s.additionalProperties && typeof s.additionalProperties === 'object')) {
        const vs = s.additionalProperties ?? Object.values(s.patternProperties)[0];
        prune(vs, v, p, out);
      } else if (s.additionalProperties === true || s.additionalProperties === undefined) {
        if (s.additionalProperties === undefined && s.properties) {
          out.push(p);
          delete obj[k];
        }
      } else {
        out.push(p);
        delete obj[k];
      }
    }
    return out;
  }
  const vs = s.patternProperties ? Object.values(s.patternProperties)[0] : s.additionalProperties;
  if (vs && typeof vs === 'object')
    for (const [k, v] of Object.entries(obj)) prune(vs, v, `${at}/${escapePointer(k)}`, out);
  return out;
}

/** Ajv's wording for a JSON type, in the words of a YAML or JSON author. */
const TYPE_WORDS: Record<string, string> = {
  integer: 'must be a whole number',
  number: 'must be a number',
  string: 'must be a string (text)',
  boolean: 'must be true or false',
  object: 'must be an object of fields',
  array: 'must be a list',
};

const FORMAT_WORDS: Record<string, string> = {
  'date-time': TIMESTAMP_MESSAGE,
  uri: 'must be an absolute URL like https://example.com/path',
};

/** The message of one Ajv error: the schema's own message when it has one, else a plain-words rendering. */
function messageOf(e: ErrorObject): string {
  const own = (e.parentSchema as Record<string, unknown> | undefined)?.[MESSAGE_KEY];
  if (typeof own === 'string') return own;
  const p = e.params as any;
  switch (e.keyword) {
    case 'type':
      return TYPE_WORDS[String(p.type)] ?? e.message ?? 'is invalid';
    case 'minimum':
      return `must be at least ${p.limit}`;
    case 'maximum':
      return `must be at most ${p.limit}`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${p.limit} characters long`;
    case 'maxLength':
      return `must be at most ${p.limit} characters long`;
    case 'minItems':
      return `must list at least ${p.limit} item${p.limit === 1 ? '' : 's'}`;
    case 'maxItems':
      return `must list at most ${p.limit} items`;
    case 'format':
      return FORMAT_WORDS[String(p.format)] ?? `must be a ${p.format}`;
    case 'pattern':
      return `must match the pattern ${p.pattern}`;
    case 'const':
      return `must be ${JSON.stringify(p.allowedValue)}`;
  }
  return e.message ?? 'is invalid';
}

function issueOf(e: ErrorObject): FieldIssue {
  if (e.keyword === 'required')
    return {
      pointer: `${e.instancePath}/${escapePointer((e.params as any).missingProperty)}`,
      message: 'is required',
    };
  if (e.keyword === 'additionalProperties') {
    const field = (e.params as any).additionalProperty as string;
    const known = Object.keys((e.parentSchema as any)?.properties ?? {});
    return {
      pointer: `${e.instancePath}/${escapePointer(field)}`,
      message: unknownFieldMessage(field, known),
    };
  }
  return { pointer: e.instancePath, message: messageOf(e) };
}

/** Collapses Ajv's per-branch errors of a union of literals into one "must be one of" issue. */
function issuesOf(errors: ErrorObject[], schemaRoot: TSchema): FieldIssue[] {
  const byPointer = new Map<string, FieldIssue>();
  for (const e of errors) {
    if (e.keyword === 'anyOf') {
      const sub = schemaAt(schemaRoot, e.schemaPath);
      const consts = (sub?.anyOf ?? []).map((b: any) => b.const).filter((c: unknown) => c !== undefined);
      if (consts.length)
        byPointer.set(e.instancePath, {
          pointer: e.instancePath,
          message: `must be one of ${consts.map((c: unknown) => JSON.stringify(c)).join(', ')}`,
        });
      continue;
    }
    if (e.keyword === 'const' && /anyOf\/\d+\/const$/.test(e.schemaPath)) continue;
    const issue = issueOf(e);
    if (!byPointer.has(issue.pointer)) byPointer.set(issue.pointer, issue);
  }
  return [...byPointer.values()];
}

function schemaAt(root: any, schemaPath: string): any {
  let cur = root;
  for (const seg of schemaPath.replace(/^#\/?/, '').split('/').filter(Boolean)) {
    if (seg === 'anyOf') {
      cur = cur?.anyOf ? cur : undefined;
      if (!cur) return undefined;
      continue;
    }
    cur = cur?.[seg.replaceAll('~1', '/').replaceAll('~0', '~')];
  }
  return cur;
}

export interface CheckedBody {
  body: any;
  /** Pointers of unknown fields that were dropped. */
  unknown: string[];
}

/** Prunes, then validates a request body for a kind. Returns issues instead of throwing. */
export function checkBody(
  kd: KindDescriptor,
  raw: unknown,
): { ok: true; value: CheckedBody } | { ok: false; issues: FieldIssue[] } {
  const s = schemasOf(kd);
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    return { ok: false, issues: [{ pointer: '', message: 'must be a JSON object' }] };
  const body = copyJson(raw) as Record<string, any>;
  dropNulls(body);
  for (const segs of s.readOnlySegments) deletePointer(body, segs);
  const unknown = prune(s.input, body);
  if (!s.check(body)) return { ok: false, issues: issuesOf(s.check.errors ?? [], s.input) };
  return { ok: true, value: { body, unknown } };
}

/** `null` means "not set" (the service's SDK clears `ttl` or `lifecycle` by sending null on a replace). */
function dropNulls(obj: Record<string, any>) {
  for (const [k, v] of Object.entries(obj)) {
    if (v === null) delete obj[k];
    else if (typeof v === 'object' && !Array.isArray(v)) dropNulls(v);
    else if (Array.isArray(v))
      for (const e of v) if (e && typeof e === 'object' && !Array.isArray(e)) dropNulls(e);
  }
}

function deletePointer(obj: Record<string, any>, segs: string[]) {
  let cur: any = obj;
  const last = segs.length - 1;
  for (let i = 0; i < last; i++) {
    cur = cur[segs[i]];
    if (cur === null || typeof cur !== 'object') return;
  }
  delete cur[segs[last]];
}

/** Validates any value against a TypeBox schema, with the same issue shape (for sub-resources). */
export function checkValue(schema: TSchema, raw: unknown, prefix = ''): FieldIssue[] {
  const fn = compiled(schema);
  if (fn(raw)) return [];
  return issuesOf(fn.errors ?? [], schema).map((i) => ({ ...i, pointer: prefix + i.pointer }));
}

const compiledCache = new WeakMap<TSchema, ValidateFunction>();
function compiled(schema: TSchema) {
  let fn = compiledCache.get(schema);
  if (!fn) {
    fn = ajv.compile(stripIds(schema));
    compiledCache.set(schema, fn);
  }
  return fn;
}
