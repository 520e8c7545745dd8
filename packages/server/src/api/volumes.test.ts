// POST /v0/volumes over a real server: the capacity refusal at create, and a deleted volume's name used again.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../test-support/server.js';

async function settled(s: TestServer, name: string) {
  for (let i = 0; i < 200; i++) {
    const v = await (await s.api(`/volumes/${name}`)).json();
    if (v.status !== 'DEPLOYING' && v.status !== 'DELETING') return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`volume ${name} never settled`);
}

describe('volume create', { skip: process.getuid?.() !== 0 && 'volumes need root' }, () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ BERTH_VOLUME_CAPACITY_MB: '100' });
  });
  after(() => s.close());

  it('a volume that does not fit the server total is a 429 saying how full it is', async () => {
    const a = await s.api('/volumes', {
      method: 'POST',
      json: { metadata: { name: 'a' }, spec: { size: 64 } },
    });
    assert.equal(a.status, 200);
    assert.equal((await settled(s, 'a')).status, 'DEPLOYED');
    const b = await s.api('/volumes', {
      method: 'POST',
      json: { metadata: { name: 'b' }, spec: { size: 64 } },
    });
    const body = await b.json();
    assert.equal(b.status, 429);
    assert.equal(body.error, 'QUOTA_EXCEEDED');
    assert.match(body.detail, /volume space of this server is full: 64 MB of 100 MB in use, 64 MB asked/);
  });

  it('a DELETE answers once the volume is gone: its name and its space are free at once', async () => {
    const del = await s.api('/volumes/a', { method: 'DELETE' });
    assert.equal(del.status, 200);
    const t = await del.json();
    assert.equal(t.status, 'TERMINATED');
    assert.ok(!Number.isNaN(Date.parse(t.terminatedAt)));
    assert.equal((await s.api('/volumes/a')).status, 404, 'read right after the DELETE, as the SDK does');
    const again = await s.api('/volumes', {
      method: 'POST',
      json: { metadata: { name: 'a' }, spec: { size: 64 } },
    });
    assert.equal(again.status, 200);
    assert.equal((await again.json()).status, 'DEPLOYED', 'a create answers once the volume is made');
  });
});
