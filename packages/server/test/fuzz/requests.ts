// Requests for every operation of the OpenAPI document (dereferenced), as fast-check arbitraries: path parameters
// that name objects that exist, names of nothing, traversal and encoding tricks; query parameters of the right and
// the wrong type; bodies that are schema-valid, at or past the schema's bounds, mutated, of the wrong type, not
// JSON, huge or deeply nested; and odd headers (content types, workspaces, credentials, API versions).
import fc from 'fast-check';
import { AWKWARD_STRINGS, fromSchema, mutate } from '../../src/test-support/arbitrary.js';

export interface DocOperation {
  operationId: string;
  method: string;
  /** As the document has it, e.g. /sandboxes/{sandboxName}/schedules/{scheduleId}. */
  path: string;
  params: string[];
  query: { name: string; schema: any }[];
  body?: { types: string[]; schema: any; required: boolean };
  responses: Record<string, any>;
  public: boolean;
}

export interface FuzzRequest {
  operationId: string;
  method: string;
  /** Sent as is (already percent-encoded where it is), /v0 included. */
  url: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  /** What the body is meant to be, for the report. */
  bodyKind: BodyKind;
}

export type BodyKind =
  | 'none'
  | 'valid'
  | 'edge'
  | 'mutated'
  | 'wrong-type'
  | 'not-json'
  | 'huge'
  | 'deep'
  | 'bytes';

/** Who sends the requests, and the names that exist when the run starts. */
export interface FuzzContext {
  key: string;
  workspace: string;
  /** Path parameter name → values that name an object of the fuzzing tenant. */
  known: Record<string, string[]>;
}

const METHODS = ['get', 'post', 'put', 'delete'] as const;

export function operationsOf(doc: any): DocOperation[] {
  const out: DocOperation[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths))
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      const params: any[] = op.parameters ?? [];
      const content = op.requestBody?.content;
      const types = content ? Object.keys(content) : [];
      out.push({
        operationId: op.operationId,
        method: m.toUpperCase(),
        path,
        params: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: params.filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: p.schema ?? {} })),
        body: types.length
          ? { types, schema: content[types[0]].schema ?? {}, required: !!op.requestBody.required }
          : undefined,
        responses: op.responses ?? {},
        public: Array.isArray(op.security) && op.security.length === 0,
      });
    }
  return out;
}

/** Names the fuzzer's own creates use, so that later requests find what earlier ones made. */
export const FUZZ_NAMES = ['fz-a', 'fz-b', 'fz-c'];

/** Path segments that try to leave the route or the workspace: dot segments, encoded slashes and NULs, overlong. */
export const TRICKY_SEGMENTS = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2E%2F%2E%2E%2Fetc%2Fpasswd',
  '..%2F..%2Fworkspaces',
  '..%5C..%5C',
  '%252e%252e%252f',
  '%2F',
  'a%2Fb',
  '%00',
  'a%00b',
  '%',
  '%zz',
  '%E2%80%AE',
  '%C3%BC',
  '%F0%9F%98%80',
  '%ED%A0%80',
  '%20',
  '~',
  '*',
  '..;',
  'a;b=c',
  'con',
  '-',
  'A',
  'default',
  'x'.repeat(64),
  'x'.repeat(600),
];

const encode = (s: string) => encodeURIComponent(s);

function pathValue(param: string, ctx: FuzzContext): fc.Arbitrary<string> {
  const known = ctx.known[param] ?? [];
  return fc.oneof(
    {
      weight: known.length ? 6 : 0,
      arbitrary: known.length ? fc.constantFrom(...known).map(encode) : fc.constant('x'),
    },
    { weight: 2, arbitrary: fc.constantFrom(...FUZZ_NAMES) },
    { weight: 2, arbitrary: fc.constantFrom(...TRICKY_SEGMENTS) },
    { weight: 1, arbitrary: fc.string({ maxLength: 20 }).map(encode) },
  );
}

function queryValue(schema: any): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fromSchema(schema).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '',
        '-1',
        '0',
        '1e400',
        'abc',
        'true',
        'null',
        '[]',
        '%zz',
        'x'.repeat(5000),
      ),
    },
  );
}

/** The query string: each documented parameter present or not, right or wrong, and sometimes one undocumented. */
function queryOf(op: DocOperation): fc.Arbitrary<string> {
  const parts = op.query.map((q) =>
    fc.option(
      queryValue(q.schema).map((v) => `${encode(q.name)}=${v.startsWith('%') ? v : encode(v)}`),
      { freq: 2 },
    ),
  );
  const extra = fc.option(fc.constantFrom('unknown=1', 'limit=1&limit=2', '__proto__=x', 'a[b]=c'), {
    freq: 6,
  });
  return fc.tuple(fc.tuple(...parts), extra).map(([ps, x]) => {
    const all = [...ps, x].filter((p): p is string => !!p);
    return all.length ? `?${all.join('&')}` : '';
  });
}

/** The credential and workspace headers: mostly the fuzzer's own, sometimes missing, wrong or odd. */
function authHeaders(ctx: FuzzContext): fc.Arbitrary<Record<string, string>> {
  const auth = fc.oneof(
    { weight: 12, arbitrary: fc.constant({ authorization: `Bearer ${ctx.key}` }) },
    { weight: 1, arbitrary: fc.constant({}) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        { authorization: 'Bearer ' },
        { authorization: 'Bearer bl_notakey' },
        { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
        { authorization: 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.' },
        { authorization: `bearer ${ctx.key}` },
        { 'x-blaxel-authorization': `Bearer ${ctx.key}` },
      ),
    },
  );
  const ws = fc.oneof(
    { weight: 6, arbitrary: fc.constant({}) },
    { weight: 3, arbitrary: fc.constant({ 'x-blaxel-workspace': ctx.workspace }) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        { 'x-service-workspace': 'default' },
        { 'x-blaxel-workspace': 'no-such-workspace' },
        { 'x-blaxel-workspace': '../default' },
        { 'x-blaxel-workspace': '' },
        { 'x-blaxel-workspace': 'x'.repeat(300) },
        { 'x-service-workspace': ctx.workspace, 'x-blaxel-workspace': 'default' },
      ),
    },
  );
  const extra = fc.oneof(
    { weight: 8, arbitrary: fc.constant({}) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        { 'blaxel-version': '2026-04-28' },
        { 'blaxel-version': 'yesterday' },
        { 'blaxel-version': '9999-99-99' },
        { accept: 'application/xml' },
        { accept: '*/*;q=0' },
        { 'accept-encoding': 'gzip, br' },
        { 'x-forwarded-for': '127.0.0.1, 10.0.0.1' },
        { 'x-http-method-override': 'DELETE' },
        { 'x-padding': 'p'.repeat(8000) },
        { cookie: 'a=b; bl_preview_token=x' },
      ),
    },
  );
  return fc.tuple(auth, ws, extra).map(([a, w, e]) => ({ ...a, ...w, ...e }));
}

/** Replaces `metadata.name` of an object body with a name of the fuzzer's pool most of the time. */
function named(body: unknown): fc.Arbitrary<unknown> {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return fc.constant(body);
  const md = (body as any).metadata;
  if (!md || typeof md !== 'object') return fc.constant(body);
  return fc.option(fc.constantFrom(...FUZZ_NAMES), { freq: 4 }).map((n) => {
    if (n === null) return body;
    return { ...(body as object), metadata: { ...md, name: n } };
  });
}

function nest(depth: number): string {
  return `${'['.repeat(depth)}${']'.repeat(depth)}`;
}

/** A JSON body: what the schema wants, and everything around it. */
function jsonBody(schema: any): fc.Arbitrary<{ text: string; kind: BodyKind }> {
  const valid = fromSchema(schema).chain(named);
  const asJson = (kind: BodyKind) => (v: unknown) => ({ text: JSON.stringify(v) ?? 'null', kind });
  return fc.oneof(
    { weight: 5, arbitrary: valid.map(asJson('valid')) },
    { weight: 4, arbitrary: fromSchema(schema, { mode: 'edge' }).chain(named).map(asJson('edge')) },
    { weight: 4, arbitrary: valid.chain(mutate).map(asJson('mutated')) },
    {
      weight: 2,
      arbitrary: fc
        .oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom(...AWKWARD_STRINGS), fc.constant([]))
        .map(asJson('wrong-type')),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('{', '{"a":', "{'a':1}", '[1,]', 'NaN', '\u0000', '{"a":1}{"b":2}', '\ufeff{}', 'nul')
        .map((text) => ({ text, kind: 'not-json' as BodyKind })),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(2_000_000, 200_000).map((n) => ({
        text: JSON.stringify({ metadata: { name: 'fz-a' }, spec: { x: 'y'.repeat(n) } }),
        kind: 'huge' as BodyKind,
      })),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(40, 200, 5000).map((d) => ({ text: nest(d), kind: 'deep' as BodyKind })),
    },
  );
}

const JSON_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/merge-patch+json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=zz',
  'application/json; charset=utf-16',
  'application/octet-stream',
];

/** The body and its content type for an operation that takes one (or sometimes one that does not). */
function bodyOf(op: DocOperation): fc.Arbitrary<{ body?: string | Buffer; type?: string; kind: BodyKind }> {
  if (!op.body) {
    return fc.oneof(
      { weight: 9, arbitrary: fc.constant({ kind: 'none' as BodyKind }) },
      {
        weight: 1,
        arbitrary: fc.constant({ body: '{"x":1}', type: 'application/json', kind: 'wrong-type' as BodyKind }),
      },
    );
  }
  const declared = op.body.types[0];
  if (declared !== 'application/json') {
    // Archives: bytes that are not one, a truncated zip or tar header, nothing.
    return fc
      .tuple(
        fc.oneof(
          fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
          fc.constantFrom(
            Buffer.from('PK\u0003\u0004'),
            Buffer.alloc(1024),
            Buffer.from('not an archive'),
            Buffer.alloc(0),
          ),
        ),
        fc.constantFrom(declared, declared, 'application/json', 'application/octet-stream'),
      )
      .map(([body, type]) => ({ body, type, kind: 'bytes' as BodyKind }));
  }
  const none = fc.constant({ kind: 'none' as BodyKind });
  return fc.oneof(
    {
      weight: 12,
      arbitrary: fc
        .tuple(jsonBody(op.body.schema), fc.constantFrom(...JSON_TYPES.slice(0, 1)))
        .map(([b, type]) => ({ body: b.text, type, kind: b.kind })),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(jsonBody(op.body.schema), fc.constantFrom(...JSON_TYPES))
        .map(([b, type]) => ({ body: b.text, type, kind: b.kind })),
    },
    { weight: 1, arbitrary: none },
  );
}

/** A request to `op`. */
export function requestOf(op: DocOperation, ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const params = fc.tuple(...op.params.map((p) => pathValue(p, ctx)));
  return fc.tuple(params, queryOf(op), authHeaders(ctx), bodyOf(op)).map(([values, query, headers, b]) => {
    let i = 0;
    const path = op.path.replace(/\{\w+\}/g, () => values[i++]);
    const h: Record<string, string> = { ...headers };
    if (b.type) h['content-type'] = b.type;
    return {
      operationId: op.operationId,
      method: op.method,
      url: `/v0${path}${query}`,
      headers: h,
      body: b.body,
      bodyKind: b.kind,
    };
  });
}

/** Requests spread over every operation (each as likely as the next). */
export function requestsOf(ops: DocOperation[], ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...ops).chain((op) => requestOf(op, ctx));
}
