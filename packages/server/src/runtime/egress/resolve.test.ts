// The guarded resolver's cache: answers are kept per sandbox (a second sandbox asking the same name is asked
// upstream for, never served the first one's answer), for the record's TTL at most, and forgotten with the
// sandbox's policy change.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AddressPolicy } from '../../outbound/index.js';
import { GuardedResolver } from './resolve.js';
import { type FakeResolver, startFakeResolver } from './test-support.js';

const A = '10.200.0.2';
const B = '10.200.0.3';
let upstream: FakeResolver;
let shortTtl: FakeResolver;
const table = { 'api.test': '198.51.100.7', 'gone.test': '198.51.100.8' };
const policy = new AddressPolicy({ allowCidrs: ['198.51.100.0/24'], loopback: 'never' });

before(async () => {
  upstream = await startFakeResolver(table, {}, 30);
  shortTtl = await startFakeResolver(table, {}, 2);
});
after(() => {
  upstream.close();
  shortTtl.close();
});

/** A resolver on `server` whose clock the test moves; `queries` counts what reached the upstream for `name`. */
function resolverOn(server: FakeResolver) {
  let now = 1_000_000;
  const r = new GuardedResolver({ servers: [server.server], policy, clock: () => now });
  return {
    r,
    advance: (ms: number) => {
      now += ms;
    },
    queries: (name: string) => server.queries.filter((q) => q === name).length,
  };
}

test("a second sandbox's lookup is asked upstream, never served from the first sandbox's answers", async () => {
  const { r, queries } = resolverOn(upstream);
  const before = queries('api.test');
  assert.deepEqual(await r.resolve(A, 'api.test'), { addresses: ['198.51.100.7'] });
  assert.deepEqual(await r.resolve(A, 'api.test'), { addresses: ['198.51.100.7'] });
  assert.equal(queries('api.test') - before, 1, "the first sandbox's second lookup is its cached answer");
  await r.resolve(B, 'api.test');
  assert.equal(queries('api.test') - before, 2, 'the second sandbox has its own lookup');
});

test('concurrent lookups of one name by one sandbox share one upstream query', async () => {
  const { r, queries } = resolverOn(upstream);
  const before = queries('api.test');
  const all = await Promise.all(Array.from({ length: 20 }, () => r.resolve(A, 'api.test')));
  assert.ok(all.every((x) => x.addresses[0] === '198.51.100.7'));
  assert.equal(queries('api.test') - before, 1);
});

test("an answer is re-resolved once its record's TTL (below the cap) has run out", async () => {
  const { r, advance, queries } = resolverOn(shortTtl);
  const before = queries('api.test');
  await r.resolve(A, 'api.test');
  advance(1_900);
  await r.resolve(A, 'api.test');
  assert.equal(queries('api.test') - before, 1, 'within the 2 s TTL: cached');
  advance(200);
  await r.resolve(A, 'api.test');
  assert.equal(queries('api.test') - before, 2, 'past the TTL: asked again');
});

test('a long TTL is capped at 5 s, and a changed record is then followed', async () => {
  const { r, advance, queries } = resolverOn(upstream);
  const before = queries('gone.test');
  assert.deepEqual(await r.resolve(A, 'gone.test'), { addresses: ['198.51.100.8'] });
  (table as Record<string, string>)['gone.test'] = '127.0.0.1'; // rebinding to a blocked address
  advance(4_900);
  assert.deepEqual(await r.resolve(A, 'gone.test'), { addresses: ['198.51.100.8'] });
  advance(200);
  assert.deepEqual(await r.resolve(A, 'gone.test'), { addresses: [], reason: 'blocked-by-resolved-address' });
  assert.equal(queries('gone.test') - before, 2);
  (table as Record<string, string>)['gone.test'] = '198.51.100.8';
});

test("forget drops one sandbox's answers and keeps the others'", async () => {
  const { r, queries } = resolverOn(upstream);
  const before = queries('api.test');
  await r.resolve(A, 'api.test');
  await r.resolve(B, 'api.test');
  r.forget(A);
  await r.resolve(A, 'api.test');
  await r.resolve(B, 'api.test');
  assert.equal(queries('api.test') - before, 3, 'A asked again after forget, B still cached');
});
