// Unknown fields are still accepted (forward compatibility) but never silently: a create or replace names each
// one in a `warnings` array of its body, with a suggestion where the slip is obvious, and validation messages
// say the unit or format a field wants.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('write warnings and messages', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('a misspelt field is dropped and named in the body with a suggestion, on PUT and POST', async () => {
    const put = await s.api('/jobs/typo', {
      method: 'PUT',
      json: { metadata: { name: 'typo' }, spec: { runtime: { memroy: 512, timeout: 60 } } },
    });
    assert.equal(put.status, 200, await put.clone().text());
    const job = await put.json();
    assert.deepEqual(job.warnings, [
      {
        pointer: '/spec/runtime/memroy',
        message: 'is not a known field and was ignored; did you mean "memory"?',
      },
    ]);
    assert.equal(job.spec.runtime.memory, 1024, 'the default applies, as before');
    assert.match(put.headers.get('warning') ?? '', /unknown field \/spec\/runtime\/memroy/);

    const post = await s.api('/policies', {
      method: 'POST',
      json: {
        metadata: { name: 'eu', colour: 'blue' },
        spec: { type: 'location', locations: [{ name: 'eu' }], xyzzy: 1 },
      },
    });
    assert.equal(post.status, 200, await post.clone().text());
    assert.deepEqual((await post.json()).warnings, [
      { pointer: '/metadata/colour', message: 'is not a known field and was ignored' },
      { pointer: '/spec/xyzzy', message: 'is not a known field and was ignored' },
    ]);
  });

  it('a clean write has no warnings field, and reads never have one', async () => {
    const put = await s.api('/policies/clean', {
      method: 'PUT',
      json: { metadata: { name: 'clean' }, spec: { type: 'location', locations: [{ name: 'eu' }] } },
    });
    assert.equal(put.status, 200);
    assert.equal('warnings' in (await put.json()), false);
    assert.equal('warnings' in (await (await s.api('/jobs/typo')).json()), false);
  });

  it('strict field validation refuses a misspelt field with the same suggestion', async () => {
    const r = await s.api('/policies/strict?fieldValidation=Strict', {
      method: 'PUT',
      json: { metadata: { name: 'strict', lables: {} }, spec: { type: 'location', locations: [] } },
    });
    assert.equal(r.status, 400);
    const p = await r.json();
    assert.deepEqual(p.errors, [
      { pointer: '/metadata/lables', message: 'is not a known field; did you mean "labels"?' },
    ]);
    assert.equal((await s.api('/policies/strict')).status, 404, 'nothing was stored');
  });

  it('a rule broken by a misspelt field names the slip in the refusal too', async () => {
    const r = await s.api('/policies/slip', {
      method: 'PUT',
      json: {
        metadata: { name: 'slip' },
        spec: { type: 'maxToken', maxTokns: { output: 100, granularity: 'hour' } },
      },
    });
    assert.equal(r.status, 422);
    const p = await r.json();
    assert.deepEqual(
      p.errors.map((e: { pointer: string }) => e.pointer),
      ['/spec/maxTokens', '/spec/maxTokns'],
    );
    assert.equal(p.errors[1].message, 'is not a known field and was ignored; did you mean "maxTokens"?');
    assert.equal((await s.api('/policies/slip')).status, 404, 'nothing was stored');
  });

  it('ttl, memory, timeouts and sizes say their unit and an example', async () => {
    const bad = await s.api('/jobs/units', {
      method: 'PUT',
      json: { metadata: { name: 'units' }, spec: { runtime: { memory: 100000, timeout: '15m' } } },
    });
    assert.equal(bad.status, 422);
    const byPointer = Object.fromEntries((await bad.json()).errors.map((e: any) => [e.pointer, e.message]));
    assert.deepEqual(byPointer, {
      '/spec/runtime/memory': 'must be a whole number of MB from 128 to 65536 (e.g. 4096)',
      '/spec/runtime/timeout': 'must be a whole number of seconds from 1 to 86400 (e.g. 900)',
    });

    const sbx = await s.api('/sandboxes', {
      method: 'POST',
      json: {
        metadata: { name: 'units' },
        spec: {
          runtime: { ttl: '1 day', memory: '4GB', envs: [{ name: '1ST', value: 'x' }] },
          volumes: [{ name: 'data', mountPath: 'data' }],
        },
      },
    });
    assert.equal(sbx.status, 422);
    assert.deepEqual(Object.fromEntries((await sbx.json()).errors.map((e: any) => [e.pointer, e.message])), {
      '/spec/runtime/ttl': 'must be a duration like 30s, 15m, 24h, 7d (units s, m, h, d, w)',
      '/spec/runtime/memory': 'must be a whole number of MB from 128 to 65536 (e.g. 4096)',
      '/spec/runtime/envs/0/name':
        'must be an environment variable name: letters, digits and _, not starting with a digit (e.g. API_URL)',
      '/spec/volumes/0/mountPath': 'must be an absolute path like /data',
    });

    const vol = await s.api('/volumes/v', {
      method: 'PUT',
      json: { metadata: { name: 'v' }, spec: { size: '1GB' } },
    });
    assert.equal(vol.status, 422);
    assert.match(
      (await vol.json()).errors[0].message,
      /^must be a whole number of MB from 1 to \d+ \(e\.g\. 1024\)$/,
    );

    const named = await s.api('/policies', {
      method: 'POST',
      json: { metadata: { name: 'Clean!' }, spec: { type: 'location', locations: [{ name: 'eu' }] } },
    });
    assert.equal(named.status, 422);
    assert.match(
      (await named.json()).errors[0].message,
      /lowercase letters, digits and -, 1 to 63 characters/,
    );
  });
});
