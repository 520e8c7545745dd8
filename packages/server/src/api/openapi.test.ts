import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Type } from '../kinds/typebox.js';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { KINDS } from '../kinds/index.js';
import { startTestServer, type TestServer } from '../test-support/server.js';
import { buildOpenApiDocument } from './openapi.js';
import { SchemaCollector } from './openapi-schema.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** The routes the server serves besides the generic CRUD of kinds (api/*.ts, templates/, models/). */
const NON_CRUD = [
  'GET /openapi.json',
  'POST /oauth/token',
  'GET /service_accounts',
  'POST /service_accounts',
  'GET /service_accounts/{clientId}',
  'PUT /service_accounts/{clientId}',
  'DELETE /service_accounts/{clientId}',
  'GET /service_accounts/{clientId}/api_keys',
  'POST /service_accounts/{clientId}/api_keys',
  'DELETE /service_accounts/{clientId}/api_keys/{apiKeyId}',
  'GET /workspaces',
  'POST /workspaces',
  'GET /workspaces/{workspaceName}',
  'PUT /workspaces/{workspaceName}',
  'DELETE /workspaces/{workspaceName}',
  'GET /workspaces/{workspaceName}/members',
  'POST /workspaces/{workspaceName}/members',
  'PUT /workspaces/{workspaceName}/members/{subject}',
  'DELETE /workspaces/{workspaceName}/members/{subject}',
  'GET /workspaces/{workspaceName}/invitations',
  'DELETE /workspaces/{workspaceName}/invitations/{subject}',
  'POST /workspaces/{workspaceName}/invitations/{subject}/accept',
  'GET /invitations',
  'GET /quotas',
  'GET /workspaces/{workspaceName}/quotas',
  'GET /templates',
  'GET /templates/{templateName}',
  'GET /sandboxes/{sandboxName}/previews/{previewName}/tokens',
  'POST /sandboxes/{sandboxName}/previews/{previewName}/tokens',
  'DELETE /sandboxes/{sandboxName}/previews/{previewName}/tokens/{tokenName}',
  'GET /volume_templates/{volumeTemplateName}/versions',
  'PUT /volume_templates/{volumeTemplateName}/versions/{versionName}',
  'DELETE /volume_templates/{volumeTemplateName}/versions/{versionName}',
  'GET /integrations/connections/{connectionName}/models',
  'GET /models/{modelName}/usage',
  'GET /policies/{policyName}/usages',
  'GET /egressgateways/usage',
  'GET /users',
  'POST /users',
  'PUT /users/{subOrEmail}',
  'DELETE /users/{subOrEmail}',
  'DELETE /workspaces/{workspaceName}/leave',
  'POST /workspaces/availability',
  'GET /mcp/hub',
  'GET /sandbox/hub',
  'GET /locations',
  'GET /configuration',
  'GET /publicIps',
  'GET /features',
  'GET /features/{featureKey}',
  'GET /changelog',
  'GET /integrations/{integrationName}',
  'GET /integrations/connections/{connectionName}/models/{modelId}',
  'GET /integrations/connections/{connectionName}/endpointConfigurations',
  'GET /models/{modelName}/revisions',
  'GET /schedules',
  'GET /schedule-executions',
  'GET /schedules/metrics',
  'GET /egressgateways',
  'GET /egressips',
  'GET /volumes/by-external-id/{externalId}',
  'GET /nodes',
];

describe('GET /v0/openapi.json', () => {
  let s: TestServer;
  let doc: any;
  before(async () => {
    s = await startTestServer();
    const r = await s.api('/openapi.json', { key: null });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    doc = await r.json();
  });
  after(() => s.close());

  it('is served without a credential and is a valid OpenAPI 3.1 document', async () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.version, '0');
    // validate() dereferences in place: give it a copy so later tests see the $refs.
    await SwaggerParser.validate(structuredClone(doc));
  });

  it('documents the five verbs of every kind with its schemas', () => {
    for (const kd of KINDS) {
      const coll = doc.paths[kd.path];
      const item = doc.paths[`${kd.path}/{${kd.nameParam}}`];
      assert.ok(coll?.get && item?.get, `${kd.kind}: list and get are documented`);
      if (!kd.readOnlyKind)
        assert.ok(coll.post && item.put && item.delete, `${kd.kind}: writes are documented`);
      assert.ok(doc.components.schemas[kd.kind], `${kd.kind} schema`);
      assert.ok(doc.components.schemas[`${kd.kind}Input`], `${kd.kind}Input schema`);
      const params = item.get.parameters.filter((p: any) => p.in === 'path').map((p: any) => p.name);
      assert.deepEqual(params, [...(kd.parents ?? []).map((p) => p.param), kd.nameParam]);
    }
  });

  it('names the query parameters of lists, reads and writes', () => {
    const names = (op: any) => op.parameters.map((p: any) => (p.$ref ? p.$ref.split('/').pop() : p.name));
    const policies = doc.paths['/policies'];
    assert.deepEqual(
      ['limit', 'cursor', 'labels', 'show_secrets'].filter((n) => names(policies.get).includes(n)),
      ['limit', 'cursor', 'labels', 'show_secrets'],
    );
    assert.ok(names(policies.post).includes('fieldValidation'));
    assert.ok(names(doc.paths['/policies/{policyName}'].put).includes('fieldValidation'));
    assert.ok(names(doc.paths['/policies/{policyName}'].get).includes('show_secrets'));
    if (doc.paths['/sandboxes']) assert.ok(names(doc.paths['/sandboxes'].post).includes('createIfNotExist'));
  });

  it('answers errors with the Problem schema as application/problem+json and uses bearer auth', () => {
    const problem = doc.components.responses.Problem.content['application/problem+json'].schema;
    assert.equal(problem.$ref, '#/components/schemas/Problem');
    assert.deepEqual(doc.components.schemas.Problem.required, [
      'type',
      'title',
      'status',
      'detail',
      'code',
      'error',
      'message',
    ]);
    assert.deepEqual(doc.paths['/policies'].post.responses['4XX'], {
      $ref: '#/components/responses/Problem',
    });
    assert.deepEqual(doc.security, [{ bearer: [] }]);
    assert.deepEqual(doc.components.securitySchemes.bearer, {
      type: 'http',
      scheme: 'bearer',
      description: doc.components.securitySchemes.bearer.description,
    });
    assert.deepEqual(doc.paths['/openapi.json'].get.security, []);
    assert.deepEqual(doc.paths['/oauth/token'].post.security, []);
  });

  it('documents every non-CRUD route the server serves, with its method', () => {
    for (const route of NON_CRUD) {
      const [method, path] = route.split(' ');
      assert.ok(doc.paths[path]?.[method.toLowerCase()], `${route} is documented`);
    }
    assert.ok(
      doc.paths['/service_accounts'].post.responses['200'].content['application/json'].schema.$ref.endsWith(
        '/ServiceAccountCreated',
      ),
    );
  });

  it('documents only routes the server serves: no documented operation is a "no route" 404', async () => {
    let calls = 0;
    for (const [path, ops] of Object.entries<Record<string, unknown>>(doc.paths)) {
      // Every path parameter gets a name that exists nowhere: the route answers 4xx, but it answers.
      const url = path.replace(/\{\w+\}/g, 'doc-probe');
      for (const method of Object.keys(ops)) {
        const write = method === 'post' || method === 'put';
        // An array is no valid body anywhere, so no write can succeed and create something.
        const r = await s.api(url, { method: method.toUpperCase(), ...(write ? { json: [] } : {}) });
        const text = await r.text();
        calls++;
        if (r.status !== 404) continue;
        const detail = JSON.parse(text).detail as string;
        assert.doesNotMatch(detail, /^no route /, `${method.toUpperCase()} ${path} is served`);
      }
    }
    assert.ok(calls > NON_CRUD.length);
    // The check itself: a route that is not served answers the "no route" problem.
    const none = await (await s.api('/service_accounts/x/nothing-here')).json();
    assert.match(none.detail, /^no route GET /);
  });

  it('describes what the non-CRUD routes answer: real answers validate against the documented schemas', async () => {
    const deref: any = await SwaggerParser.dereference(structuredClone(doc));
    const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
    async function call(method: string, docPath: string, url: string, json?: unknown): Promise<any> {
      const r = await s.api(url, { method, ...(json !== undefined ? { json } : {}) });
      const body = await r.json();
      assert.equal(r.status, 200, `${method} ${url}: ${JSON.stringify(body)}`);
      const op = deref.paths[docPath][method.toLowerCase()];
      if (op.requestBody) {
        const ok = ajv.validate(op.requestBody.content['application/json'].schema, json ?? {});
        assert.ok(ok, `${method} ${docPath} request: ${ajv.errorsText()}`);
      }
      const ok = ajv.validate(op.responses['200'].content['application/json'].schema, body);
      assert.ok(ok, `${method} ${docPath} answer: ${ajv.errorsText()}`);
      return body;
    }
    const sa = await call('POST', '/service_accounts', '/service_accounts', {
      name: 'doc-sa',
      description: 'checks the document',
      role: 'viewer',
    });
    const one = `/service_accounts/${sa.client_id}`;
    await call('GET', '/service_accounts', '/service_accounts');
    await call('GET', '/service_accounts/{clientId}', one);
    await call('PUT', '/service_accounts/{clientId}', one, { description: 'changed' });
    const key = await call('POST', '/service_accounts/{clientId}/api_keys', `${one}/api_keys`, {
      name: 'k',
      expires_in: '1d',
    });
    await call('GET', '/service_accounts/{clientId}/api_keys', `${one}/api_keys`);
    await call('DELETE', '/service_accounts/{clientId}/api_keys/{apiKeyId}', `${one}/api_keys/${key.id}`);

    const ws = '/workspaces/{workspaceName}';
    await call('POST', '/workspaces', '/workspaces', { name: 'doc-ws', displayName: 'Doc' });
    await call('GET', '/workspaces', '/workspaces');
    await call('GET', ws, '/workspaces/doc-ws');
    await call('PUT', ws, '/workspaces/doc-ws', { displayName: 'Doc 2' });
    await call('POST', `${ws}/members`, '/workspaces/doc-ws/members', {
      subject: sa.client_id,
      role: 'viewer',
    });
    await call('PUT', `${ws}/members/{subject}`, `/workspaces/doc-ws/members/${sa.client_id}`, {
      role: 'member',
    });
    await call('GET', `${ws}/members`, '/workspaces/doc-ws/members');
    await call('DELETE', `${ws}/members/{subject}`, `/workspaces/doc-ws/members/${sa.client_id}`);
    await call('GET', `${ws}/quotas`, '/workspaces/doc-ws/quotas');
    await call('GET', '/quotas', '/quotas');
    await call('DELETE', ws, '/workspaces/doc-ws');

    const [template] = await call('GET', '/templates', '/templates');
    await call('GET', '/templates/{templateName}', `/templates/${template.name}`);
    await call('DELETE', '/service_accounts/{clientId}', one);
  });

  it('describes both shapes of a versioned list, and a bare one as an array: real answers of each validate', async () => {
    const deref: any = await SwaggerParser.dereference(structuredClone(doc));
    const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
    await s.api('/policies', {
      method: 'POST',
      json: { metadata: { name: 'doc-p' }, spec: { type: 'flavor', flavors: [{ name: 'cpu' }] } },
    });
    const versioned = [
      '/policies',
      '/service_accounts',
      '/users',
      '/egressgateways',
      '/schedules',
      '/workspaces',
    ];
    const bare = ['/mcp/hub', '/sandbox/hub', '/locations', '/templates'];
    for (const path of [...versioned, ...bare]) {
      const schema = deref.paths[path].get.responses['200'].content['application/json'].schema;
      assert.equal(
        !!schema.oneOf,
        versioned.includes(path),
        `${path}: documented as ${JSON.stringify(schema).slice(0, 80)}`,
      );
      for (const version of [undefined, '2026-04-28']) {
        const r = await s.api(path, { headers: version ? { 'blaxel-version': version } : {} });
        const body = await r.json();
        assert.equal(r.status, 200, `${path}: ${JSON.stringify(body)}`);
        assert.equal(Array.isArray(body), !version || bare.includes(path), `${path} with ${version}`);
        assert.ok(ajv.validate(schema, body), `${path} (${version ?? 'baseline'}): ${ajv.errorsText()}`);
      }
    }
  });

  it('is self-contained: every $ref points inside the document and no $id is left', () => {
    const text = JSON.stringify(doc);
    assert.ok(!text.includes('"$id"'));
    for (const m of text.matchAll(/"\$ref":"([^"]+)"/g)) {
      assert.ok(m[1].startsWith('#/components/'), `${m[1]} is local`);
      const [, , section, name] = m[1].split('/');
      assert.ok(doc.components[section]?.[name], `${m[1]} is defined`);
    }
  });

  it('matches what the server validates: a body the schema rejects is refused by the server', async () => {
    const input = doc.components.schemas.PolicyInput;
    assert.deepEqual(input.properties.spec.properties.type.enum, ['location', 'flavor', 'maxToken']);
    const r = await s.api('/policies', {
      method: 'POST',
      json: { metadata: { name: 'p' }, spec: { type: 'nope' } },
    });
    assert.equal(r.status, 422);
    assert.equal(r.headers.get('content-type')?.split(';')[0], 'application/problem+json');
  });
});

describe('buildOpenApiDocument', () => {
  it('is the document the server serves (pure, no server needed)', async () => {
    const s = await startTestServer();
    try {
      const served = await (await s.api('/openapi.json', { key: null })).json();
      assert.deepEqual(served, JSON.parse(JSON.stringify(buildOpenApiDocument(KINDS))));
    } finally {
      await s.close();
    }
  });

  it('hoists nested $id schemas into components and refuses a reference to an undefined schema', () => {
    const c = new SchemaCollector();
    const Inner = Type.Object({ a: Type.String() }, { $id: 'Inner' });
    const out = c.inline(Type.Object({ inner: Inner, tags: Type.Record(Type.String(), Type.String()) }));
    assert.deepEqual(out.properties.inner, { $ref: '#/components/schemas/Inner' });
    assert.deepEqual(out.properties.tags, { type: 'object', additionalProperties: { type: 'string' } });
    assert.deepEqual(c.schemas.Inner.required, ['a']);
    c.inline(Type.Object({ x: Type.Unsafe({ $ref: 'Missing' }) }));
    assert.deepEqual(c.dangling(), ['Missing']);
    assert.throws(() => c.named(Type.Object({ b: Type.String() }), 'Inner'), /two different schemas/);
  });
});
