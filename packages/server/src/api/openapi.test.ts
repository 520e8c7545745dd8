import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Type } from '@sinclair/typebox';
import { KINDS } from '../kinds/index.js';
import { startTestServer, type TestServer } from '../test-support/server.js';
import { buildOpenApiDocument } from './openapi.js';
import { SchemaCollector } from './openapi-schema.js';

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

  it('documents the non-CRUD routes', () => {
    for (const p of [
      '/service_accounts',
      '/service_accounts/{clientId}/api_keys',
      '/service_accounts/{clientId}/api_keys/{apiKeyId}',
      '/oauth/token',
      '/workspaces',
      '/workspaces/{workspaceName}/members',
      '/templates',
      '/templates/{templateName}',
    ])
      assert.ok(doc.paths[p], `${p} is documented`);
    assert.ok(
      doc.paths['/service_accounts'].post.responses['200'].content['application/json'].schema.$ref.endsWith(
        '/ServiceAccountCreated',
      ),
    );
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
