// Property: random and mutated bodies for every kind never yield a 5xx, and a rejected write changes nothing stored.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { KINDS } from '../src/kinds/index.js';
import { schemasOf } from '../src/kinds/schema.js';
import type { KindDescriptor } from '../src/kinds/types.js';
import { fromSchema, mutate } from '../src/test-support/arbitrary.js';
import { startTestServer, type TestServer } from '../src/test-support/server.js';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 40);
let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.close());

/** The collection path of a kind with every parent created (valid parents are made once per kind). */
async function collectionPath(kd: KindDescriptor): Promise<string> {
  let path = kd.path;
  for (const ref of kd.parents ?? []) {
    const pk = KINDS.find((k) => k.kind === ref.kind)!;
    const parentColl = await collectionPath(pk);
    const name = `parent-${pk.plural.replace(/[^a-z]/g, '')}`.slice(0, 40);
    const body = fc.sample(fromSchema(schemasOf(pk).input), { numRuns: 30, seed: 7 }).find(Boolean) as any;
    await server.api(parentColl, { method: 'POST', json: { ...body, metadata: { name } } });
    path = path.replace(`{${ref.param}}`, name);
  }
  return path;
}

async function snapshot(path: string) {
  const r = await server.api(`${path}?limit=1000`);
  assert.ok(r.status < 500, `list ${path} answered ${r.status}`);
  const items = r.status === 200 ? ((await r.json()) as any[]) : [];
  return JSON.stringify(items.map((i) => [i.metadata.name, i.metadata.resourceVersion]));
}

for (const kd of KINDS.filter((k) => !k.readOnlyKind)) {
  test(`${kd.kind}: random and mutated bodies never get a 5xx and rejected writes change nothing`, async () => {
    const coll = await collectionPath(kd);
    const valid = fromSchema(schemasOf(kd).input);
    const body = fc.oneof(valid, valid.chain(mutate), fc.jsonValue({ maxDepth: 3 }));
    await fc.assert(
      fc.asyncProperty(body, fc.boolean(), async (b, usePut) => {
        const before = await snapshot(coll);
        const name = (b as any)?.metadata?.name;
        const target =
          usePut && typeof name === 'string' && /^[a-z0-9-]{1,63}$/.test(name) ? `${coll}/${name}` : coll;
        const r = await server.api(target, { method: target === coll ? 'POST' : 'PUT', json: b });
        const text = await r.text();
        assert.ok(r.status < 500, `${r.status} for ${JSON.stringify(b)}: ${text}`);
        if (r.status >= 400) {
          assert.equal(r.headers.get('content-type'), 'application/problem+json; charset=utf-8');
          assert.equal(JSON.parse(text).code, r.status);
          assert.equal(await snapshot(coll), before, 'a rejected write changed stored state');
        }
      }),
      { numRuns: RUNS, seed: Number(process.env.PROPERTY_SEED ?? Date.now() % 100000) },
    );
  });
}
