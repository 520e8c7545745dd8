import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { buildOpenApiDocument } from '../../server/src/api/openapi.js';
import { KINDS } from '../../server/src/kinds/index.js';
import { startTestServer, type TestServer } from '../../server/src/test-support/server.js';
import { renderDocument, renderKinds, renderTypes } from '../scripts/render.mjs';
import { BerthApiError, createBerthClient, itemsOf, type Schemas, unwrap } from './index.js';

const committed = (rel: string) => readFileSync(new URL(rel, import.meta.url), 'utf8');
const HOW = 'regenerate with `npm run build && npm run sdk:generate`';

describe('generated SDK files', () => {
  it('openapi.json is the document the server code builds now', () => {
    assert.equal(
      committed('../openapi.json'),
      renderDocument(buildOpenApiDocument(KINDS)),
      `openapi.json is stale: ${HOW}`,
    );
  });

  it('schema.d.ts is what openapi-typescript makes of that document', async () => {
    const fresh = await renderTypes(buildOpenApiDocument(KINDS));
    assert.equal(committed('./schema.d.ts'), fresh, `src/schema.d.ts is stale: ${HOW}`);
  });

  it('kinds.json is the kinds table of the server code now', () => {
    assert.equal(committed('../kinds.json'), renderKinds(KINDS), `kinds.json is stale: ${HOW}`);
  });
});

describe('createBerthClient against a real server', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('creates, gets, lists and deletes a policy', async () => {
    const client = createBerthClient({ baseUrl: s.url, apiKey: s.adminKey });
    const body: Schemas['PolicyInput'] = {
      metadata: { name: 'eu-only', labels: { team: 'infra' } },
      spec: { type: 'location', locations: [{ name: 'eu', type: 'continent' }] },
    };
    const created = await client.POST('/policies', { body });
    assert.equal(created.response.status, 200);
    assert.equal(created.data?.metadata.name, 'eu-only');
    assert.ok(created.data?.metadata.createdAt);

    const got = await unwrap(
      client.GET('/policies/{policyName}', { params: { path: { policyName: 'eu-only' } } }),
    );
    assert.deepEqual(got.spec.locations, [{ name: 'eu', type: 'continent' }]);

    const list = await unwrap(
      client.GET('/policies', { params: { query: { labels: 'team=infra', limit: 10 } } }),
    );
    assert.deepEqual(
      itemsOf(list).map((p) => p.metadata.name),
      ['eu-only'],
    );

    const deleted = await unwrap(
      client.DELETE('/policies/{policyName}', { params: { path: { policyName: 'eu-only' } } }),
    );
    assert.equal(deleted.metadata.name, 'eu-only');
    const gone = await client.GET('/policies/{policyName}', { params: { path: { policyName: 'eu-only' } } });
    assert.equal(gone.response.status, 404);
    assert.equal(gone.error?.error, 'NOT_FOUND');
  });

  it('types the warnings of a replace that dropped an unknown field', async () => {
    const client = createBerthClient({ baseUrl: s.url, apiKey: s.adminKey });
    // An unknown field is not in PolicyInput; a client talking to a newer server may still send one.
    const body = {
      metadata: { name: 'typo' },
      spec: { type: 'location', locations: [{ name: 'eu' }], locatoins: [] },
    } as Schemas['PolicyInput'];
    const put = await unwrap(
      client.PUT('/policies/{policyName}', { params: { path: { policyName: 'typo' } }, body }),
    );
    const warnings: Schemas['WriteWarnings']['warnings'] = put.warnings;
    assert.deepEqual(warnings, [
      {
        pointer: '/spec/locatoins',
        message: 'is not a known field and was ignored; did you mean "locations"?',
      },
    ]);
  });

  it('hands back the problem of a failed call', async () => {
    const client = createBerthClient({ baseUrl: `${s.url}/v0/`, apiKey: s.adminKey, workspace: 'default' });
    const bad = client.POST('/policies', { body: { metadata: { name: 'p' }, spec: { type: 'maxToken' } } });
    await assert.rejects(unwrap(bad), (e: unknown) => {
      assert.ok(e instanceof BerthApiError);
      assert.equal(e.status, 422);
      assert.equal(e.problem?.error, 'VALIDATION_FAILED');
      assert.ok(e.problem?.errors?.some((i) => i.pointer === '/spec/maxTokens'));
      return true;
    });
    const anonymous = createBerthClient({ baseUrl: s.url, apiKey: 'bk_not-a-key' });
    const r = await anonymous.GET('/policies');
    assert.equal(r.response.status, 401);
    assert.equal(r.error?.code, 401);
  });
});
