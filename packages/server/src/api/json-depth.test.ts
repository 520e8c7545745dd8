// A body nested thousands deep is a 400 with a clear problem, not a stack overflow answered as a 500.
import assert from 'node:assert/strict';
import { after, before, describe, it, test } from 'node:test';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../http/json-depth.js';
import { startTestServer, type TestServer } from '../test-support/server.js';

const nested = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
const policy = (locations: string) =>
  `{"metadata":{"name":"deep"},"spec":{"type":"location","locations":${locations}}}`;

describe('JSON nesting limit of the API', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  const post = (body: string) =>
    s.api('/policies', { method: 'POST', body, headers: { 'content-type': 'application/json' } });

  it('answers 400 to a body nested far past the limit', async () => {
    for (const n of [MAX_JSON_DEPTH + 1, 5000, 200_000]) {
      const r = await post(policy(nested(n)));
      const p = await r.json();
      assert.equal(r.status, 400, `${n}: ${JSON.stringify(p)}`);
      assert.equal(p.error, 'MALFORMED_REQUEST');
      assert.match(p.detail, new RegExp(`deeper than ${MAX_JSON_DEPTH}`));
    }
  });

  it('judges a body within the limit by its schema as before', async () => {
    const r = await post(policy(nested(MAX_JSON_DEPTH - 3)));
    assert.equal(r.status, 422);
  });
});

test('brackets inside strings do not count, escaped quotes do not end a string', () => {
  assert.equal(nestsDeeperThan(JSON.stringify({ a: '[[[[[[[[' }), 3), false);
  assert.equal(nestsDeeperThan(JSON.stringify({ a: 'x\\"[[[[' }), 3), false);
  assert.equal(nestsDeeperThan('[[[[]]]]', 3), true);
  assert.equal(nestsDeeperThan('[[[]]]', 3), false);
});
