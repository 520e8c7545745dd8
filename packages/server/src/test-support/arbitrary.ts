// fast-check arbitraries derived from a JSON schema (a kind's, or one of the OpenAPI document's, dereferenced):
// valid-looking bodies, bodies at and just past the schema's bounds, and mutations of them.
import fc from 'fast-check';

const nameArb = fc
  .stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/)
  .filter((s) => s.length > 0 && s.length <= 63);

/**
 * `valid`: values the schema accepts (for the keywords Berth's schemas use). `edge`: each leaf is, half the time, a
 * value at one of its bounds or just past it (lengths, ranges, item counts), or a string of awkward characters.
 */
export type SchemaMode = 'valid' | 'edge';

export interface SchemaOptions {
  mode?: SchemaMode;
  /** Replaces the arbitrary of strings that match this test (e.g. names drawn from a pool that exists). */
  strings?: (s: any) => fc.Arbitrary<string> | undefined;
}

/** Strings that trip up code handling text: controls, right-to-left marks, astral characters, lone surrogates. */
export const AWKWARD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\nb',
  '\u202e\u0645\u0631\u062d\u0628\u0627',
  '\ud83d\ude00\ud83c\udff3\ufe0f\u200d\ud83c\udf08',
  '\ud800',
  '\\',
  '../../etc/passwd',
  '%00',
  '\u0024{jndi:x}',
  '<script>',
  "' OR 1=1 --",
  'é'.normalize('NFD'),
];

function validString(s: any): fc.Arbitrary<string> {
  if (s.enum) return fc.constantFrom(...s.enum);
  if (s.format === 'date-time')
    return fc
      .date({ min: new Date('2030-01-01'), max: new Date('2040-01-01'), noInvalidDate: true })
      .map((d) => d.toISOString());
  if (s.format === 'date')
    return fc
      .date({ min: new Date('2020-01-01'), max: new Date('2040-01-01'), noInvalidDate: true })
      .map((d) => d.toISOString().slice(0, 10));
  if (s.format === 'uri') return fc.webUrl();
  if (s.format === 'email') return fc.emailAddress();
  if (s.pattern === '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$') return nameArb;
  if (s.pattern === '^[0-9]+(s|m|h|d|w)$')
    return fc
      .tuple(fc.integer({ min: 1, max: 99 }), fc.constantFrom('s', 'm', 'h', 'd', 'w'))
      .map(([n, u]) => `${n}${u}`);
  if (s.pattern === '^/') return fc.stringMatching(/^\/[a-z]{1,8}$/);
  if (s.pattern)
    return fc
      .stringMatching(new RegExp(s.pattern))
      .filter((x) => x.length >= (s.minLength ?? 0) && x.length <= (s.maxLength ?? 1e9));
  const min = s.minLength ?? 0;
  return fc.string({ minLength: min, maxLength: Math.max(min, Math.min(s.maxLength ?? 12, 12)) });
}

function edgeString(s: any): fc.Arbitrary<string> {
  const lengths = [s.minLength ?? 0, Math.max(0, (s.minLength ?? 1) - 1)];
  if (s.maxLength !== undefined) lengths.push(s.maxLength, s.maxLength + 1);
  return fc.oneof(
    fc.constantFrom(...lengths).map((n) => 'a'.repeat(n)),
    fc.constantFrom(...AWKWARD_STRINGS),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.constant('x'.repeat(70_000)),
  );
}

function edgeNumber(s: any, integer: boolean): fc.Arbitrary<number> {
  const xs = [0, -1, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1e308];
  if (s.minimum !== undefined) xs.push(s.minimum, s.minimum - 1);
  if (s.maximum !== undefined) xs.push(s.maximum, s.maximum + 1);
  if (integer) xs.push(0.5, (s.minimum ?? 0) + 0.5);
  return fc.constantFrom(...xs);
}

const typeOf = (s: any) => (Array.isArray(s.type) ? s.type[0] : s.type);

/** An arbitrary of values for the schema (see SchemaMode). */
export function fromSchema(s: any, opts: SchemaOptions = {}, depth = 0): fc.Arbitrary<unknown> {
  const edge = opts.mode === 'edge';
  const next = (x: any) => fromSchema(x ?? {}, opts, depth + 1);
  const orEdge = <T>(valid: fc.Arbitrary<T>, bound: () => fc.Arbitrary<T>) =>
    edge ? fc.oneof(valid, bound()) : valid;
  if (s.const !== undefined) return fc.constant(s.const);
  if (s.enum && typeOf(s) !== 'string') return fc.constantFrom(...s.enum);
  const alt = s.anyOf ?? s.oneOf;
  if (alt) return fc.oneof(...alt.map((b: any) => fromSchema(b, opts, depth)));
  if (s.allOf)
    return fc
      .tuple(...s.allOf.map((b: any) => fromSchema(b, opts, depth)))
      .map((parts) => Object.assign({}, ...parts.filter((p) => p && typeof p === 'object')));
  switch (typeOf(s)) {
    case 'string': {
      const custom = opts.strings?.(s);
      return orEdge(custom ?? validString(s), () => edgeString(s));
    }
    case 'integer':
      return orEdge(fc.integer({ min: s.minimum ?? 0, max: Math.min(s.maximum ?? 100_000, 100_000) }), () =>
        edgeNumber(s, true),
      );
    case 'number':
      return orEdge(
        fc.double({ min: s.minimum ?? 0, max: s.maximum ?? 1000, noNaN: true, noDefaultInfinity: true }),
        () => edgeNumber(s, false),
      );
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      if (depth > 4) return fc.constant([]);
      const item = next(s.items);
      const valid = fc.array(item, {
        minLength: s.minItems ?? 0,
        maxLength: Math.max(s.minItems ?? 0, Math.min(s.maxItems ?? 2, 2)),
      });
      return orEdge(valid, () =>
        s.maxItems !== undefined
          ? fc.array(item, { minLength: s.maxItems + 1, maxLength: s.maxItems + 1 })
          : fc.array(item, { minLength: 50, maxLength: 50 }),
      );
    }
    case 'object': {
      if (s.properties) {
        const required = new Set<string>(s.required ?? []);
        const rec: Record<string, fc.Arbitrary<unknown>> = {};
        for (const [k, v] of Object.entries(s.properties)) rec[k] = next(v);
        return fc.record(rec, { requiredKeys: [...required] as any });
      }
      const vs = s.patternProperties ? Object.values(s.patternProperties)[0] : s.additionalProperties;
      if (vs && typeof vs === 'object')
        return fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), next(vs), { maxKeys: 2 });
      return fc.constant({});
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** Replaces the value at a random path of `body` with a random JSON value (or deletes it). */
export const mutate = (body: unknown) =>
  fc.tuple(fc.nat(), fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined))).map(([pick, value]) => {
    const copy = structuredClone(body) as any;
    const paths: (string | number)[][] = [];
    const walk = (o: any, p: (string | number)[]) => {
      if (o === null || typeof o !== 'object') return;
      for (const k of Object.keys(o)) {
        paths.push([...p, Array.isArray(o) ? Number(k) : k]);
        walk(o[k], [...p, k]);
      }
    };
    walk(copy, []);
    if (!paths.length) return value;
    const path = paths[pick % paths.length];
    let o = copy;
    for (const k of path.slice(0, -1)) o = o[k];
    const last = path.at(-1)!;
    if (value === undefined) delete o[last];
    else o[last] = value;
    return copy;
  });
