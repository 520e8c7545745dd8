// The preview wire of the SDK vendor's own suite (decision 085), driven by the unmodified @blaxel/core SDK: a
// preview's `prefixUrl` is its address, 15 tokens created at once all succeed, a token is deleted by its value.
// A second tenant tries the first one's tokens (by value and by name) and its prefix (the same one, and one whose
// host label meets the first one's).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { startTestServer, type TestServer } from '../../src/test-support/server.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';

/** A's prefix; in B's workspace `x-default`, the prefix `shop` makes the same host label `pv-shop-x-default`. */
const PREFIX = 'shop-x';

describe('preview wire of the SDK: prefixUrl, concurrent tokens, delete by value', () => {
  let s: TestServer;
  let b: Tenant;
  let sdk: any;
  const asB = () => ({ key: b.key });
  const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();

  before(async () => {
    s = await startTestServer();
    b = await newTenant(s, 'x-default');
    for (const key of [undefined, b.key])
      assert.equal(
        (await s.api('/sandboxes', { method: 'POST', key, json: { metadata: { name: 'box' }, spec: {} } }))
          .status,
        200,
      );
    const stdout = await runBlaxelScript(join(import.meta.dirname, 'blaxel-previews-wire.mjs'), s, {
      SANDBOX_NAME: 'box',
      PREFIX,
    });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    sdk = JSON.parse(line.slice('RESULT '.length));
  });
  after(() => s?.close());

  it('gives a preview created with a prefixUrl an address that carries it, served as that preview', async () => {
    assert.equal(sdk.prefixed.url, `${s.url}/run/default/${PREFIX}`, JSON.stringify(sdk.prefixed));
    const refused = await fetch(`${sdk.prefixed.url}/`);
    assert.equal(refused.status, 401, 'the private preview answers at its prefix address');
    assert.doesNotMatch((await refused.json()).detail, /prefixed|box/, 'a refusal names none of its names');
  });

  it('creates 15 tokens at once with the SDK, each with its own name', async () => {
    assert.equal(sdk.concurrent.values?.length, 15, JSON.stringify(sdk.concurrent));
    assert.equal(new Set(sdk.concurrent.values).size, 15);
    assert.equal(sdk.concurrent.listed, 15);
    const names = (await (await s.api('/sandboxes/box/previews/many/tokens')).json()).map(
      (t: any) => t.metadata.name,
    );
    assert.equal(new Set(names).size, 15);
    for (const n of names) assert.match(n, /^token-\d+(-[0-9a-f]{8})?$/);
  });

  it('deletes a token by its value with the SDK', () => {
    assert.equal(sdk.deleteByValue.error, undefined, sdk.deleteByValue.error);
    assert.equal(sdk.deleteByValue.after, sdk.deleteByValue.before - 1);
  });

  it('still refuses a name the client chose twice (409): only the SDK-made names get a suffix', async () => {
    const tokens = '/sandboxes/box/previews/many/tokens';
    const mine = { metadata: { name: 'ci' }, spec: { expiresAt: inAnHour() } };
    assert.equal((await s.api(tokens, { method: 'POST', json: mine })).status, 200);
    const dup = await s.api(tokens, { method: 'POST', json: mine });
    assert.equal(dup.status, 409);
    assert.equal((await dup.json()).error, 'PREVIEW_TOKEN_ALREADY_EXISTS');
    assert.equal((await s.api(`${tokens}/ci`, { method: 'DELETE' })).status, 200);
  });

  it('a value deletes only a token of the preview named in the path', async () => {
    const other = await s.api(`/sandboxes/box/previews/prefixed/tokens/${sdk.concurrent.values[1]}`, {
      method: 'DELETE',
    });
    assert.equal(other.status, 404);
    assert.equal((await s.api('/sandboxes/box/previews/many/tokens')).status, 200);
    assert.equal((await (await s.api('/sandboxes/box/previews/many/tokens')).json()).length, 15);
  });

  it("B cannot delete A's tokens by value or by name, in its own workspace or naming A's", async () => {
    // B has a sandbox and preview of the same names, so its own paths exist.
    const created = await s.api('/sandboxes/box/previews', {
      method: 'POST',
      ...asB(),
      json: { metadata: { name: 'many' }, spec: { port: 3000 } },
    });
    assert.equal(created.status, 200);
    const aTokens = await (await s.api('/sandboxes/box/previews/many/tokens')).json();
    const value = sdk.concurrent.values[2];
    for (const ref of [value, aTokens[0].metadata.name]) {
      const own = await s.api(`/sandboxes/box/previews/many/tokens/${ref}`, { method: 'DELETE', ...asB() });
      assert.equal(own.status, 404, ref);
      assert.ok(!(await own.json()).detail.includes(value), 'the message does not echo the value');
      const named = await s.api(`/sandboxes/box/previews/many/tokens/${ref}`, {
        method: 'DELETE',
        ...asB(),
        headers: { 'x-blaxel-workspace': 'default' },
      });
      assert.ok([403, 404].includes(named.status), `${ref}: ${named.status}`);
    }
    assert.equal((await (await s.api('/sandboxes/box/previews/many/tokens')).json()).length, 15);
  });

  it("B's preview may ask for A's prefix: it gets its own address, and A's token does not open it", async () => {
    const r = await s.api('/sandboxes/box/previews', {
      method: 'POST',
      ...asB(),
      json: { metadata: { name: 'same' }, spec: { port: 3000, prefixUrl: PREFIX } },
    });
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    assert.equal(body.spec.url, `${s.url}/run/x-default/${PREFIX}`);
    const withA = await fetch(`${body.spec.url}/?bl_preview_token=${sdk.prefixed.token}`);
    assert.equal(withA.status, 401);
    const aStill = await fetch(`${sdk.prefixed.url}/`);
    assert.equal(aStill.status, 401, "A's address still names A's private preview");
  });

  it("B cannot take A's preview host label with a prefix that spells it in B's workspace (409, A unnamed)", async () => {
    const r = await s.api('/sandboxes/box/previews', {
      method: 'POST',
      ...asB(),
      json: { metadata: { name: 'squat' }, spec: { port: 3000, prefixUrl: 'shop' } },
    });
    const body = await r.json();
    assert.equal(r.status, 409, JSON.stringify(body));
    assert.match(body.detail, /another workspace/);
    assert.doesNotMatch(body.detail, /prefixed|Preview/, "names none of A's objects");
    assert.equal((await s.api('/sandboxes/box/previews/squat', asB())).status, 404, 'nothing half-written');
  });

  it('refuses a prefixUrl that is no DNS label, a reserved run segment, or too long for the label (422)', async () => {
    for (const [prefixUrl, message] of [
      ['My_Prefix', /DNS label/],
      ['sandboxes', /serves sandboxes/],
      ['p'.repeat(60), /at most 52 characters/],
    ] as const) {
      const r = await s.api('/sandboxes/box/previews', {
        method: 'POST',
        json: { metadata: { name: 'bad' }, spec: { port: 3000, prefixUrl } },
      });
      const body = await r.json();
      assert.equal(r.status, 422, prefixUrl);
      assert.equal(body.errors[0].pointer, '/spec/prefixUrl');
      assert.match(body.errors[0].message, message);
    }
  });
});
