// End-to-end CRUD of every kind of the registry over HTTP, against a real server.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { errorPrefixOf } from '../errors.js';
import { KINDS } from '../kinds/index.js';
import { SAMPLES } from '../kinds/samples.js';
import type { KindDescriptor } from '../kinds/types.js';
import { startTestServer, type TestServer } from '../test-support/server.js';

/** The collection path of a kind with its parents filled in, e.g. /vpcs/net/egressgateways. */
function pathOf(kd: KindDescriptor, parents: string[]) {
  let i = 0;
  return kd.path.replace(/\{\w+\}/g, () => encodeURIComponent(parents[i++]));
}

/** Polls GET until it answers 404: a controller removes objects marked DELETING. */
async function gone(s: TestServer, path: string) {
  for (let i = 0; i < 200; i++) {
    if ((await s.api(path)).status === 404) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`${path} was never removed`);
}

/** Kinds whose DELETE answers once the deletion is done (api/wait.ts): the service's SDK reads them right after. */
const DELETED_BEFORE_ANSWER = new Set(['Sandbox', 'Volume', 'Drive']);

describe('CRUD of every kind', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  const created = new Map<string, any>();

  // Registry order puts parents first, and the samples' parents are the parents' own samples.
  for (const kd of KINDS) {
    const sample = SAMPLES[kd.kind];
    const coll = () => pathOf(kd, sample.parents);
    const item = () => `${coll()}/${sample.valid.metadata.name}`;

    it(`${kd.kind}: POST creates it, a second POST is ${errorPrefixOf(kd.kind)}_ALREADY_EXISTS`, async () => {
      const r = await s.api(coll(), { method: 'POST', json: sample.valid });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal(body.metadata.name, sample.valid.metadata.name);
      assert.equal(body.metadata.workspace, 'default');
      if (kd.hasStatus) {
        assert.ok(['DEPLOYING', 'DEPLOYED'].includes(body.status), body.status);
        assert.equal(body.events[0].type, 'deployment');
      } else {
        assert.equal(body.status, undefined);
        assert.equal(body.events, undefined);
      }
      for (const [i, p] of (kd.parents ?? []).entries())
        assert.equal(body.metadata[p.metadataField], sample.parents[i]);
      created.set(kd.kind, body);

      const again = await s.api(coll(), { method: 'POST', json: sample.valid });
      const problem = await again.json();
      assert.equal(again.status, 409);
      assert.equal(problem.code, 409);
      assert.equal(problem.error, `${errorPrefixOf(kd.kind)}_ALREADY_EXISTS`);
    });

    it(`${kd.kind}: GET reads it and the list (a bare array) includes it`, async () => {
      const r = await s.api(item());
      assert.equal(r.status, 200);
      assert.equal((await r.json()).metadata.name, sample.valid.metadata.name);
      const list = await (await s.api(coll())).json();
      assert.ok(Array.isArray(list));
      assert.ok(list.some((o: any) => o.metadata.name === sample.valid.metadata.name));
    });

    it(`${kd.kind}: PUT replaces it with a new resourceVersion; a stale resourceVersion is a 409 CONFLICT`, async () => {
      const first = created.get(kd.kind);
      const next = structuredClone(sample.valid);
      sample.change(next);
      const r = await s.api(item(), { method: 'PUT', json: next });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.notEqual(body.metadata.resourceVersion, first.metadata.resourceVersion);
      assert.equal(body.metadata.createdAt, first.metadata.createdAt);

      const stale = structuredClone(next);
      (stale.metadata as any).resourceVersion = first.metadata.resourceVersion;
      const c = await s.api(item(), { method: 'PUT', json: stale });
      assert.equal(c.status, 409);
      assert.equal((await c.json()).error, 'CONFLICT');
    });
  }

  it('nested paths answer 404 when a parent is missing', async () => {
    for (const path of [
      '/vpcs/nope/egressgateways',
      '/vpcs/net/egressgateways/nope/ips',
      '/sandboxes/nope/previews',
    ]) {
      const list = await s.api(path);
      assert.equal(list.status, 404, path);
      const post = await s.api(path, {
        method: 'POST',
        json: { metadata: { name: 'x' }, spec: { port: 80 } },
      });
      assert.equal(post.status, 404, path);
      assert.equal((await post.json()).code, 404);
    }
  });

  it('a VPC that still has a gateway cannot be deleted (409)', async () => {
    const r = await s.api('/vpcs/net', { method: 'DELETE' });
    const p = await r.json();
    assert.equal(r.status, 409);
    assert.equal(p.error, 'INVALID_STATE');
    assert.match(p.detail, /egressgateways \(gw\)/);
  });

  it('a preview says which sandbox it belongs to', async () => {
    const p = await (await s.api('/sandboxes/box/previews/web')).json();
    assert.equal(p.metadata.resourceName, 'box');
    assert.equal(p.metadata.resourceType, 'Sandbox');
    assert.equal(p.spec.region, 'local');
  });

  it('an unknown field is dropped with a Warning header; fieldValidation=Strict rejects it (400)', async () => {
    const body = { metadata: { name: 'warned' }, spec: { size: 10, colour: 'blue' } };
    const r = await s.api('/volumes', { method: 'POST', json: body });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('warning') ?? '', /unknown field \/spec\/colour/);
    assert.equal((await r.json()).spec.colour, undefined);

    const strict = await s.api('/volumes?fieldValidation=Strict', {
      method: 'POST',
      json: { ...body, metadata: { name: 'strict' } },
    });
    const p = await strict.json();
    assert.equal(strict.status, 400);
    assert.deepEqual(p.errors, [{ pointer: '/spec/colour', message: 'is not a known field' }]);
    assert.equal((await s.api('/volumes/strict')).status, 404);
  });

  it('a volume size cannot change after creation (422 on /spec/size)', async () => {
    const r = await s.api('/volumes/warned', {
      method: 'PUT',
      json: { metadata: { name: 'warned' }, spec: { size: 20 } },
    });
    const p = await r.json();
    assert.equal(r.status, 422);
    assert.deepEqual(p.errors, [{ pointer: '/spec/size', message: 'cannot change after creation' }]);
  });

  it('a malformed sandbox image name is a 422 on /spec/runtime/image, before anything starts', async () => {
    const r = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'badimage' }, spec: { runtime: { image: 'Python:3.12 slim' } } },
    });
    const p = await r.json();
    assert.equal(r.status, 422);
    assert.equal(p.errors[0].pointer, '/spec/runtime/image');
    assert.match(p.errors[0].message, /is not an image reference/);
    assert.equal((await s.api('/sandboxes/badimage')).status, 404);
  });

  it('an unknown region is a 422 listing the known ones', async () => {
    const r = await s.api('/volumes', {
      method: 'POST',
      json: { metadata: { name: 'far' }, spec: { region: 'mars-1' } },
    });
    const p = await r.json();
    assert.equal(r.status, 422);
    assert.equal(p.errors[0].pointer, '/spec/region');
    assert.match(p.errors[0].message, /known regions: local/);
  });

  it('a secret env value reads as ******** and is stored encrypted; show_secrets reveals it to an admin', async () => {
    const body = {
      metadata: { name: 'with-secret' },
      spec: {
        runtime: {
          envs: [
            { name: 'TOKEN', value: 'hunter2-plain', secret: true },
            { name: 'MODE', value: 'dev' },
          ],
        },
      },
    };
    assert.equal((await s.api('/agents', { method: 'POST', json: body })).status, 200);
    const got = await (await s.api('/agents/with-secret')).json();
    assert.deepEqual(got.spec.runtime.envs, [
      { name: 'TOKEN', value: '********', secret: true },
      { name: 'MODE', value: 'dev' },
    ]);
    const shown = await (await s.api('/agents/with-secret?show_secrets=true')).json();
    assert.equal(shown.spec.runtime.envs[0].value, 'hunter2-plain');

    // The server holds the database exclusively: read its files' bytes (the WAL holds recent writes).
    const files = readdirSync(s.dataDir).filter((f) => f.startsWith('berth.db'));
    const bytes = Buffer.concat(files.map((f) => readFileSync(join(s.dataDir, f))));
    assert.ok(!bytes.includes('hunter2-plain'), 'the secret is stored in clear');
    assert.ok(bytes.includes('"value":"enc:v1:'), 'the sealed value is stored');

    // GET then PUT of the whole object (what the SDK does) keeps the stored secret.
    delete got.metadata.resourceVersion;
    got.spec.runtime.memory = 4096;
    assert.equal((await s.api('/agents/with-secret', { method: 'PUT', json: got })).status, 200);
    const kept = await (await s.api('/agents/with-secret?show_secrets=true')).json();
    assert.equal(kept.spec.runtime.envs[0].value, 'hunter2-plain');
  });

  it('every value of a connection secret map is redacted', async () => {
    const c = await (await s.api('/integrations/connections/openai-main')).json();
    assert.deepEqual(c.spec.secret, { apiKey: '********' });
  });

  it('a sandbox created without a name gets one', async () => {
    const r = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: {}, spec: { runtime: { ttl: '1h' } } },
    });
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.match(body.metadata.name, /^sandbox-[0-9a-f]{8}$/);
    assert.ok(body.expiresIn > 3500 && body.expiresIn <= 3600, String(body.expiresIn));
  });

  it('lists page with limit and cursor and filter by labels', async () => {
    for (const [name, team] of [
      ['pa', 'red'],
      ['pb', 'blue'],
      ['pc', 'red'],
    ])
      await s.api('/policies', {
        method: 'POST',
        json: { metadata: { name, labels: { team } }, spec: { type: 'flavor', flavors: [{ name: 'cpu' }] } },
      });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await s.api(`/policies?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      const page = await r.json();
      assert.ok(page.length <= 2);
      seen.push(...page.map((p: any) => p.metadata.name));
      cursor = r.headers.get('x-next-cursor');
    } while (cursor);
    assert.deepEqual(seen, ['eu-only', 'pa', 'pb', 'pc']);
    const red = await (await s.api('/policies?labels=team=red')).json();
    assert.deepEqual(
      red.map((p: any) => p.metadata.name),
      ['pa', 'pc'],
    );
  });

  // Children first: a parent with a child that is not `cascade` cannot go.
  for (const kd of [...KINDS].reverse()) {
    const sample = SAMPLES[kd.kind];
    const item = () => `${pathOf(kd, sample.parents)}/${sample.valid.metadata.name}`;
    const done = !kd.hasStatus || DELETED_BEFORE_ANSWER.has(kd.kind);
    it(`${kd.kind}: DELETE ${done ? 'removes it before it answers' : 'marks it DELETING, then it is removed'}`, async () => {
      const r = await s.api(item(), { method: 'DELETE' });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal(body.metadata.name, sample.valid.metadata.name);
      if (done) {
        if (kd.hasStatus) assert.equal(body.status, 'TERMINATED');
        assert.equal((await s.api(item())).status, 404);
      } else {
        assert.equal(body.status, 'DELETING');
        await gone(s, item());
      }
    });
  }
});
