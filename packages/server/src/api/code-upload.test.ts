// The control-plane side of agents and functions from code (no sandbox starts here): `?upload=true` answers a
// single-use upload URL, a malformed image name is a 422 (a well-formed one is accepted: it may be imported
// later), an object with no code says it waits for one, and a zip that breaks the archive rules is a 400 with
// nothing recorded.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import yazl from 'yazl';
import { startTestServer, type TestServer } from '../test-support/server.js';

async function zipBytes(names: string[]): Promise<Buffer> {
  const z = new yazl.ZipFile();
  for (const _ of names) z.addBuffer(Buffer.from('x'), 'placeholder');
  (z as any).entries.forEach((e: any, i: number) => {
    e.utf8FileName = Buffer.from(names[i]);
  });
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('agent code upload', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('refuses a malformed runtime.image with a 422 naming the field; accepts a well-formed one not stored yet', async () => {
    for (const path of ['/agents', '/functions', '/jobs']) {
      const res = await s.api(path, {
        method: 'POST',
        json: { metadata: { name: 'img' }, spec: { runtime: { image: 'Not//Valid' } } },
      });
      const body = await res.json();
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(body.errors[0].pointer, '/spec/runtime/image');
      const ok = await s.api(path, {
        method: 'POST',
        json: { metadata: { name: 'img' }, spec: { runtime: { image: 'local/other:1' } } },
      });
      assert.equal(ok.status, 200, await ok.text());
    }
  });

  it('?upload=true answers a single-use upload URL; an agent without code waits in UPLOADING', async () => {
    const res = await s.api('/agents/up?upload=true', {
      method: 'PUT',
      json: { metadata: { name: 'up' }, spec: {} },
    });
    assert.equal(res.status, 200);
    const url = res.headers.get('x-blaxel-upload-url');
    assert.ok(url?.startsWith(`${s.url}/uploads/`), String(url));
    const plain = await s.api('/agents/up', { method: 'PUT', json: { metadata: { name: 'up' }, spec: {} } });
    assert.equal(plain.headers.get('x-blaxel-upload-url'), null, 'only when asked');
    let o: any;
    for (let i = 0; i < 100; i++) {
      o = await (await s.api('/agents/up')).json();
      if (o.status === 'UPLOADING') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(o.status, 'UPLOADING');
    assert.match(o.events.at(-1).message, /waiting for code/);

    const bad = await fetch(url as string, {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: new Uint8Array(await zipBytes(['../../outside.txt'])),
    });
    assert.equal(bad.status, 400);
    const again = await fetch(url as string, {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: 'x',
    });
    assert.equal(again.status, 404, 'the URL was used');
    assert.equal((await (await s.api('/agents/up')).json()).source, undefined);
  });

  it('an absolute path is refused on the authenticated upload route as well', async () => {
    await s.api('/agents/abs', { method: 'PUT', json: { metadata: { name: 'abs' }, spec: {} } });
    const res = await s.api('/agents/abs/code', {
      method: 'PUT',
      headers: { 'content-type': 'application/zip' },
      body: new Uint8Array(await zipBytes(['/etc/passwd-copy'])),
    } as any);
    assert.equal(res.status, 400);
    assert.match((await res.json()).detail, /absolute|invalid/);
  });
});
