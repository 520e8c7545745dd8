// /v0/images end to end against a real server and a real loopback registry (no sandbox is started here).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  busyboxLayer,
  Pusher,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../test-support/server.js';

describe('/v0/images', () => {
  let s: TestServer;
  let reg: TestRegistry;
  let ref: string;
  let id: string;
  let dir: string;
  before(async () => {
    // The registry listens on loopback.
    [s, reg] = await Promise.all([startTestServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
    dir = mkdtempSync(join(tmpdir(), 'berth-imgapi-'));
    const img = await new Pusher(reg).image(
      'team/tool',
      'v1',
      [await busyboxLayer(), await tarOf([{ name: 'x', body: 'y' }])],
      {
        Env: ['A=b'],
      },
    );
    ref = img.reference;
    id = img.configDigest;
  });
  after(async () => {
    await s.close();
    await reg.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('pulls, lists, gets by name or id, and deletes an image', async () => {
    const pulled = await s.api('/images', { method: 'POST', json: { reference: ref } });
    assert.equal(pulled.status, 200, await pulled.clone().text());
    const body = await pulled.json();
    assert.equal(body.id, id);
    assert.deepEqual(body.config.env, ['A=b']);
    assert.equal(body.layers.length, 2);
    assert.equal(body.inUse, false);
    const list = await (await s.api('/images')).json();
    assert.deepEqual(
      list.map((i: { id: string }) => i.id),
      [id],
    );
    assert.equal((await s.api(`/images/${ref}`)).status, 200);
    assert.equal((await s.api(`/images/${id}`)).status, 200);
    const del = await s.api(`/images/${ref}`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    assert.equal((await s.api(`/images/${ref}`)).status, 404);
    assert.deepEqual(await (await s.api('/images')).json(), []);
  });

  it('refuses a malformed name (422), an unknown one (404), an unreachable registry (503)', async () => {
    const bad = await s.api('/images', { method: 'POST', json: { reference: 'Not Valid' } });
    assert.equal(bad.status, 422);
    assert.equal((await bad.json()).errors[0].pointer, '/reference');
    const missing = await s.api('/images', {
      method: 'POST',
      json: { reference: `${reg.host}/team/none:v9` },
    });
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error, 'IMAGE_NOT_FOUND');
    const down = await s.api('/images', { method: 'POST', json: { reference: '127.0.0.1:1/x:y' } });
    assert.equal(down.status, 503);
  });

  it('imports a docker save tarball streamed as the body', async () => {
    const file = join(dir, 'saved.tar');
    execFileSync('skopeo', [
      'copy',
      '--quiet',
      '--src-tls-verify=false',
      `docker://${ref}`,
      `docker-archive:${file}:local/saved:1`,
    ]);
    const r = await s.api('/images/import', {
      method: 'POST',
      body: readFileSync(file),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(r.status, 200, await r.clone().text());
    const [img] = await r.json();
    assert.equal(img.id, id);
    assert.deepEqual(img.references, ['docker.io/local/saved:1']);
    assert.equal((await s.api('/images/local/saved:1')).status, 200);
  });

  it('pulling without a credential is a 401', async () => {
    const r = await s.api('/images', { method: 'POST', json: { reference: ref }, key: null });
    assert.equal(r.status, 401);
  });
});
