// The OpenAPI 3.1 document of /v0, generated from the same TypeBox schemas the server validates with:
// five generic verbs per kind in the registry, plus the non-CRUD routes of `openapi-extra.ts`,
// `openapi-workloads.ts` and `openapi-service.ts`, and the debug read-out of every kind with a status
// (`debug-report.ts`).
// The SDK's types are generated from this document (packages/sdk/scripts/generate.mjs).
import type { Static, TSchema } from '@sinclair/typebox';
import { Type } from '../kinds/typebox.js';
import type { FastifyInstance } from 'fastify';
import { schemasOf } from '../kinds/schema.js';
import type { KindDescriptor } from '../kinds/types.js';
import type { Problem as WireProblem } from '../errors.js';
import { bareInEveryVersion, LIST_ENVELOPE_SINCE } from './api-version.js';
import { EXTRA_PATHS, type ExtraOperation, type ExtraPaths } from './openapi-extra.js';
import { IMAGE_PATHS } from './openapi-images.js';
import { DOMAIN_PATHS } from './openapi-domains.js';
import { SNAPSHOT_PATHS } from './openapi-snapshots.js';
import { SERVICE_PATHS } from './openapi-service.js';
import { WORKLOAD_PATHS } from './openapi-workloads.js';
import { debugPaths } from './debug-report.js';
import { WATCH_PATHS } from './openapi-watch.js';
import { CLUSTER_PATHS } from './openapi-cluster.js';
import { type JsonSchema, SchemaCollector, schemaRef } from './openapi-schema.js';
import { WATCH_CONTENT_TYPE } from './list-watch.js';
import { DEFAULT_LIMIT, MAX_LIMIT } from './pagination.js';

export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'URI naming the problem type' }),
    title: Type.String(),
    status: Type.Integer({ description: 'HTTP status' }),
    detail: Type.String({ description: 'what went wrong, for a person' }),
    code: Type.Integer({ description: 'the HTTP status again (read by the service SDK)' }),
    error: Type.String({
      description: 'stable machine string, e.g. VALIDATION_FAILED or SANDBOX_ALREADY_EXISTS',
    }),
    message: Type.String({ description: 'same as detail' }),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          pointer: Type.String({ description: 'JSON pointer into the request' }),
          message: Type.String(),
        }),
      ),
    ),
    instance: Type.Optional(Type.String()),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details' },
);
// Both directions, so the wire type in errors.ts and this schema cannot drift apart.
const _sameProblem: [Static<typeof ProblemSchema>, WireProblem] = [
  {} as WireProblem,
  {} as Static<typeof ProblemSchema>,
];

/** What a create or replace adds to the object it answers with, when it has something to say. */
export const WriteWarningsSchema = Type.Object(
  {
    warnings: Type.Optional(
      Type.Array(
        Type.Object({
          pointer: Type.String({ description: 'JSON pointer into the request' }),
          message: Type.String({
            description: 'e.g. is not a known field and was ignored; did you mean "memory"?',
          }),
        }),
        {
          description:
            'unknown fields that were dropped (also in the Warning header); present only when there are some',
        },
      ),
    ),
  },
  { $id: 'WriteWarnings' },
);

/** The `meta` of a list answered as `{data, meta}` (api-version.ts). */
export const PageMetaSchema = Type.Object(
  {
    hasMore: Type.Boolean({ description: 'whether another page follows' }),
    nextCursor: Type.Optional(
      Type.String({
        description: 'cursor of the next page (the `cursor` query parameter); absent on the last',
      }),
    ),
  },
  { $id: 'PageMeta' },
);

/**
 * What a list answers: the bare array, or (when the route answers through api-version.ts) the array before
 * Blaxel-Version LIST_ENVELOPE_SINCE and `{data, meta}` from it on (decision 019).
 */
export function listSchema(array: JsonSchema, versioned: boolean): JsonSchema {
  if (!versioned) return array;
  return {
    description: `a bare array; with the header Blaxel-Version ${LIST_ENVELOPE_SINCE} or later, {data, meta}`,
    oneOf: [
      array,
      {
        type: 'object',
        required: ['data', 'meta'],
        properties: { data: array, meta: schemaRef('PageMeta') },
        additionalProperties: false,
      },
    ],
  };
}

type Method = 'get' | 'post' | 'put' | 'delete';

/**
 * Operation field naming the least role the caller needs in the workspace the request addresses (absent: the
 * operation acts in no workspace of the caller's). Tests check every operation against it with each role.
 */
export const ROLE_EXTENSION = 'x-berth-role';
type Param = Record<string, unknown>;

const query = (name: string, schema: JsonSchema, description: string): Param => ({
  name,
  in: 'query',
  schema,
  description,
});
const pathParam = (name: string): Param => ({ name, in: 'path', required: true, schema: { type: 'string' } });

const PARAMETERS: Record<string, Param> = {
  limit: query(
    'limit',
    { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT },
    'page size',
  ),
  cursor: query(
    'cursor',
    { type: 'string' },
    'opaque cursor from the X-Next-Cursor header (or meta.nextCursor) of the previous page',
  ),
  apiVersion: {
    name: 'Blaxel-Version',
    in: 'header',
    schema: { type: 'string', format: 'date' },
    description:
      'API version date: from 2026-04-28 on, lists answer {data, meta: {hasMore, nextCursor}} instead of a bare array (decision 019)',
  },
  labels: query('labels', { type: 'string' }, 'label filter: key=value pairs separated by commas'),
  show_secrets: query('show_secrets', { type: 'boolean' }, 'reveal secret values (workspace admin role)'),
  watch: query(
    'watch',
    { type: 'boolean' },
    'stream application/x-ndjson instead: the current state as ADDED lines and a SYNCED line, then one line per change (MODIFIED, ADDED, DELETED) until the client closes (api/list-watch.ts); {"type":"PING"} lines keep a quiet stream open',
  ),
  fieldValidation: query(
    'fieldValidation',
    { type: 'string', enum: ['Strict', 'Warn'] },
    'Strict rejects unknown fields; otherwise they are dropped and named in `warnings` and a Warning header',
  ),
  workspace: {
    name: 'X-Service-Workspace',
    in: 'header',
    schema: { type: 'string' },
    description: 'workspace to act in (alias X-Blaxel-Workspace); default: the credential home workspace',
  },
};
const paramRef = (name: keyof typeof PARAMETERS) => ({ $ref: `#/components/parameters/${name}` });

/** Query parameters particular to one collection path (only used when a kind serves that path). */
const PATH_QUERY: Record<string, Partial<Record<Method, Param[]>>> = {
  '/sandboxes': {
    post: [query('createIfNotExist', { type: 'boolean' }, 'answer with the existing sandbox instead of 409')],
  },
  '/sandboxes/{sandboxName}/previews': {
    post: [query('force', { type: 'boolean' }, 'replace a preview of the same name instead of 409')],
  },
};

const ERROR_RESPONSES = {
  '4XX': { $ref: '#/components/responses/Problem' },
  '5XX': { $ref: '#/components/responses/Problem' },
};
const WARNING_HEADER = {
  Warning: {
    description: 'unknown fields that were dropped (299 - "unknown field ...")',
    schema: { type: 'string' },
  },
};
const PAGE_HEADERS = {
  'X-Next-Cursor': { description: 'cursor of the next page, when there is one', schema: { type: 'string' } },
  Link: { description: '<url>; rel="next", when there is a next page', schema: { type: 'string' } },
};

const json = (schema: JsonSchema) => ({ 'application/json': { schema } });
const ok = (description: string, schema: JsonSchema, headers?: Record<string, unknown>) => ({
  '200': { description, ...(headers ? { headers } : {}), content: json(schema) },
  ...ERROR_RESPONSES,
});
/** A read that also streams changes with `?watch=true`: one NDJSON line per event, each carrying the object. */
const watchable = (responses: ReturnType<typeof ok>, object: JsonSchema) => {
  const event = {
    type: 'object',
    required: ['type'],
    properties: {
      type: { type: 'string', enum: ['ADDED', 'MODIFIED', 'DELETED', 'SYNCED', 'PING'] },
      object,
    },
  };
  return {
    ...responses,
    '200': {
      ...responses['200'],
      content: { ...responses['200'].content, [WATCH_CONTENT_TYPE]: { schema: event } },
    },
  };
};

/** `Policy` -> `Policies`, `Sandbox` -> `Sandboxes`, `EgressGateway` -> `EgressGateways`. */
export function pluralOf(kind: string) {
  if (/[^aeiou]y$/.test(kind)) return `${kind.slice(0, -1)}ies`;
  if (/(s|x|z|ch|sh)$/.test(kind)) return `${kind}es`;
  return `${kind}s`;
}

const a = (word: string) => `${/^[AEIOU]/.test(word) ? 'an' : 'a'} ${word}`;

function kindPaths(kd: KindDescriptor, c: SchemaCollector, paths: Record<string, Record<string, unknown>>) {
  const { input, output } = schemasOf(kd);
  const outRef = c.named(output, kd.kind);
  const inRef = c.named(input, `${kd.kind}Input`);
  const parents = (kd.parents ?? []).map((p) => pathParam(p.param));
  const extra = PATH_QUERY[kd.path] ?? {};
  const tags = [kd.kind];
  const plural = pluralOf(kd.kind);
  const common = [...parents, paramRef('workspace')];
  const item = [...parents, pathParam(kd.nameParam), paramRef('workspace')];
  const body = { required: true, content: json(inRef) };
  const written = { allOf: [outRef, schemaRef('WriteWarnings')] };
  const writeParams = (m: Method) => [paramRef('fieldValidation'), ...(extra[m] ?? [])];

  const coll: Record<string, unknown> = {
    get: {
      operationId: `list${plural}`,
      summary: `List ${plural}`,
      tags,
      parameters: [
        ...common,
        paramRef('limit'),
        paramRef('cursor'),
        paramRef('labels'),
        paramRef('show_secrets'),
        paramRef('watch'),
        paramRef('apiVersion'),
      ],
      responses: watchable(
        ok(
          `${plural}, ordered by name`,
          listSchema({ type: 'array', items: outRef }, !bareInEveryVersion(kd.kind)),
          PAGE_HEADERS,
        ),
        outRef,
      ),
    },
  };
  const readRole = kd.readRole ?? 'viewer';
  const writeRole = kd.writeRole ?? 'member';
  (coll.get as Record<string, unknown>)[ROLE_EXTENSION] = readRole;
  const one: Record<string, unknown> = {
    get: {
      [ROLE_EXTENSION]: readRole,
      operationId: `get${kd.kind}`,
      summary: `Get ${a(kd.kind)}`,
      tags,
      parameters: [...item, paramRef('show_secrets'), paramRef('watch'), ...(extra.get ?? [])],
      responses: watchable(ok(`the ${kd.kind}`, outRef), outRef),
    },
  };
  if (!kd.readOnlyKind) {
    coll.post = {
      [ROLE_EXTENSION]: writeRole,
      operationId: `create${kd.kind}`,
      summary: `Create ${a(kd.kind)} (409 if the name exists)`,
      tags,
      parameters: [...common, ...writeParams('post')],
      requestBody: body,
      responses: ok(`the created ${kd.kind}`, written, WARNING_HEADER),
    };
    one.put = {
      [ROLE_EXTENSION]: writeRole,
      operationId: `replace${kd.kind}`,
      summary: `Create or replace ${a(kd.kind)}`,
      tags,
      parameters: [...item, ...writeParams('put')],
      requestBody: body,
      responses: ok(`the stored ${kd.kind}`, written, WARNING_HEADER),
    };
    one.delete = {
      [ROLE_EXTENSION]: writeRole,
      operationId: `delete${kd.kind}`,
      summary: `Delete ${a(kd.kind)}`,
      tags,
      parameters: [...item, ...(extra.delete ?? [])],
      responses: ok(
        kd.hasStatus
          ? `the ${kd.kind}, now DELETING (removed once its controller is done)`
          : `the deleted ${kd.kind}`,
        outRef,
      ),
    };
  }
  paths[kd.path] = coll;
  paths[`${kd.path}/{${kd.nameParam}}`] = one;
  // Served by crud.ts: the objects under every parent of the workspace, ordered by name, then parent.
  if (kd.everyParentPath)
    paths[kd.everyParentPath] = {
      get: {
        [ROLE_EXTENSION]: readRole,
        operationId: `listAll${plural}`,
        summary: `List ${plural} under every ${(kd.parents ?? []).at(-1)?.kind ?? 'parent'} of the workspace`,
        tags,
        parameters: [
          paramRef('workspace'),
          paramRef('limit'),
          paramRef('cursor'),
          paramRef('labels'),
          paramRef('show_secrets'),
          paramRef('apiVersion'),
        ],
        responses: ok(
          `${plural}, ordered by name, then parent`,
          listSchema({ type: 'array', items: outRef }, !bareInEveryVersion(kd.kind)),
          PAGE_HEADERS,
        ),
      },
    };
  // Served by crud.ts for every kind whose metadata takes an externalId.
  if (kd.metadataInput?.externalId)
    paths[`${kd.path}/by-external-id/{externalId}`] = {
      get: {
        [ROLE_EXTENSION]: readRole,
        operationId: `get${kd.kind}ByExternalId`,
        summary: `The newest ${kd.kind.toLowerCase()} with this metadata.externalId that is not being deleted`,
        tags,
        parameters: [...parents, pathParam('externalId'), paramRef('workspace')],
        responses: ok(`the ${kd.kind}`, outRef),
      },
    };
}

function errorsAs(schema: TSchema, c: SchemaCollector) {
  const r = { description: 'the request failed', content: json(c.inline(schema)) };
  return { '4XX': r, '5XX': r };
}

function extraOperation(path: string, method: Method, op: ExtraOperation, c: SchemaCollector) {
  const params = [...path.matchAll(/\{(\w+)\}/g)].map(([, name]) => {
    const schema = op.params?.[name];
    return schema ? { ...pathParam(name), schema: c.inline(schema) } : pathParam(name);
  });
  for (const name of Object.keys(op.params ?? {}))
    if (!params.some((p) => p.name === name)) throw new Error(`${path} has no path parameter ${name}`);
  for (const [name, schema] of Object.entries(op.query ?? {}))
    params.push({
      name,
      in: 'query',
      schema: c.inline(schema),
      ...(schema.description ? { description: schema.description } : {}),
    });
  if (op.paged)
    params.push(paramRef('limit'), paramRef('cursor'), paramRef('labels'), paramRef('apiVersion'));
  else if (op.versioned) params.push(paramRef('apiVersion'));
  if (!op.public) params.push(paramRef('workspace'));
  const content: Record<string, unknown> = {};
  if (op.body) {
    const schema = c.inline(op.body);
    content[op.bodyType ?? 'application/json'] = { schema };
    if (op.formBody) content['application/x-www-form-urlencoded'] = { schema };
  }
  const role = op.public ? 'none' : (op.role ?? (method === 'get' ? 'viewer' : 'member'));
  return {
    ...(role !== 'none' ? { [ROLE_EXTENSION]: role } : {}),
    operationId: op.operationId,
    summary: op.summary,
    tags: [op.tag],
    ...(op.public ? { security: [] } : {}),
    ...(params.length ? { parameters: params } : {}),
    ...(op.body ? { requestBody: { required: !op.bodyOptional, content } } : {}),
    responses: {
      [String(op.status ?? 200)]: {
        description: op.responseDescription ?? op.summary,
        ...(op.paged || op.body ? { headers: op.paged ? PAGE_HEADERS : WARNING_HEADER } : {}),
        ...(op.response
          ? {
              content: {
                [op.responseType ?? 'application/json']: {
                  schema: listSchema(c.inline(op.response), !!op.versioned),
                },
              },
            }
          : {}),
      },
      ...(op.errorBody ? errorsAs(op.errorBody, c) : ERROR_RESPONSES),
    },
  };
}

/** The whole document. Pure: no server, no I/O (the SDK generator calls it on the built package). */
export function buildOpenApiDocument(
  kinds: KindDescriptor[],
  extra: ExtraPaths = {
    ...EXTRA_PATHS,
    ...WORKLOAD_PATHS,
    ...WATCH_PATHS,
    ...CLUSTER_PATHS,
    ...SERVICE_PATHS,
    ...DOMAIN_PATHS,
    ...debugPaths(kinds),
    ...IMAGE_PATHS,
    ...SNAPSHOT_PATHS,
  },
) {
  const c = new SchemaCollector();
  c.named(ProblemSchema);
  c.named(WriteWarningsSchema);
  c.named(PageMetaSchema);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const kd of kinds) kindPaths(kd, c, paths);
  const served = new Set(kinds.map((k) => k.kind));
  const extraTags = new Set<string>();
  for (const [path, ops] of Object.entries(extra)) {
    for (const [method, op] of Object.entries(ops) as [Method, ExtraOperation][]) {
      if (op.requiresKind && !served.has(op.requiresKind)) continue;
      paths[path] ??= {};
      if (paths[path][method]) throw new Error(`${method.toUpperCase()} ${path} is documented twice`);
      paths[path][method] = extraOperation(path, method, op, c);
      if (!served.has(op.tag)) extraTags.add(op.tag);
    }
  }
  const dangling = c.dangling();
  if (dangling.length) throw new Error(`OpenAPI schemas referenced but not defined: ${dangling.join(', ')}`);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Berth management API',
      version: '0',
      description:
        'Self-hosted sandboxes, agents, MCP servers and model gateway. Errors are application/problem+json.',
    },
    servers: [{ url: '/v0' }],
    security: [{ bearer: [] }],
    tags: [
      ...kinds.map((k) => ({ name: k.kind, description: k.description })),
      ...[...extraTags].map((name) => ({ name })),
    ],
    paths,
    components: {
      schemas: c.schemas,
      parameters: PARAMETERS,
      responses: {
        Problem: {
          description: 'the request failed; the problem says why',
          content: { 'application/problem+json': { schema: schemaRef('Problem') } },
        },
      },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'an API key, or a JWT from POST /oauth/token',
        },
      },
    },
  };
}

/** Serves the document at GET /v0/openapi.json (public). Built once: kinds do not change while running. */
export function registerOpenApi(v0: FastifyInstance, kinds: KindDescriptor[]) {
  const text = JSON.stringify(buildOpenApiDocument(kinds));
  v0.get('/openapi.json', async (_req, reply) => reply.type('application/json').send(text));
}
