// fast-check arbitraries derived from a kind's JSON schema: valid-looking bodies, and mutations of them.
import fc from 'fast-check';

const nameArb = fc
  .stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/)
  .filter((s) => s.length > 0 && s.length <= 63);

function stringArb(s: any): fc.Arbitrary<string> {
  if (s.format === 'date-time')
    return fc
      .date({ min: new Date('2030-01-01'), max: new Date('2040-01-01'), noInvalidDate: true })
      .map((d) => d.toISOString());
  if (s.format === 'uri') return fc.webUrl();
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
  return fc.string({ minLength: s.minLength ?? 0, maxLength: Math.min(s.maxLength ?? 12, 12) });
}

/** An arbitrary of values that satisfy the (TypeBox-produced) JSON schema, for the subset of keywords kinds use. */
export function fromSchema(s: any, depth = 0): fc.Arbitrary<unknown> {
  if (s.const !== undefined) return fc.constant(s.const);
  if (s.anyOf) return fc.oneof(...s.anyOf.map((b: any) => fromSchema(b, depth)));
  switch (s.type) {
    case 'string':
      return stringArb(s);
    case 'integer':
      return fc.integer({ min: s.minimum ?? 0, max: Math.min(s.maximum ?? 100_000, 100_000) });
    case 'number':
      return fc.double({ min: s.minimum ?? 0, max: s.maximum ?? 1000, noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return depth > 4 ? fc.constant([]) : fc.array(fromSchema(s.items ?? {}, depth + 1), { maxLength: 2 });
    case 'object': {
      if (s.properties) {
        const required = new Set<string>(s.required ?? []);
        const rec: Record<string, fc.Arbitrary<unknown>> = {};
        for (const [k, v] of Object.entries(s.properties)) rec[k] = fromSchema(v, depth + 1);
        return fc.record(rec, { requiredKeys: [...required] as any });
      }
      const vs = s.patternProperties ? Object.values(s.patternProperties)[0] : s.additionalProperties;
      if (vs && typeof vs === 'object')
        return fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), fromSchema(vs, depth + 1), { maxKeys: 2 });
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
