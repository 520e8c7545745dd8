import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../config.js';
import { startServer } from '../main.js';
import { startTestServer, type TestServer } from '../test-support/server.js';

describe('authentication of /v0', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('answers 401 problem+json UNAUTHENTICATED without a credential', async () => {
    const r = await s.api('/policies', { key: null });
    assert.equal(r.status, 401);
    assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
    const p = await r.json();
    assert.equal(p.error, 'UNAUTHENTICATED');
    assert.equal(p.code, 401);
  });

  it('answers 401 for an unknown API key and for a non-Bearer scheme', async () => {
    const r = await s.api('/policies', { key: 'bk_not-a-real-key' });
    assert.equal(r.status, 401);
    assert.equal((await r.json()).error, 'UNAUTHENTICATED');
    const basic = await fetch(`${s.url}/v0/policies`, { headers: { authorization: `Basic ${btoa('a:b')}` } });
    assert.equal(basic.status, 401);
  });

  it('accepts the bootstrap admin key', async () => {
    const r = await s.api('/policies');
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), []);
  });

  it('accepts the key in X-Blaxel-Authorization and X-Service-Authorization, with the workspace header', async () => {
    for (const h of ['x-blaxel-authorization', 'x-service-authorization']) {
      const r = await fetch(`${s.url}/v0/policies`, {
        headers: { [h]: `Bearer ${s.adminKey}`, 'x-blaxel-workspace': 'default' },
      });
      assert.equal(r.status, 200, h);
    }
  });

  it('answers 404 for a workspace that does not exist', async () => {
    const r = await s.api('/policies', { headers: { 'x-service-workspace': 'nowhere' } });
    assert.equal(r.status, 404);
    const p = await r.json();
    assert.equal(p.error, 'NOT_FOUND');
    assert.match(p.detail, /workspace nowhere not found/);
  });

  it('wrote the admin key once to admin.key with mode 0600 and never logged it', () => {
    const file = join(s.dataDir, 'admin.key');
    assert.equal(readFileSync(file, 'utf8').trim(), s.adminKey);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(s.adminKey.startsWith('bk_'));
    assert.ok(!s.logs().includes(s.adminKey));
  });
});

describe('bootstrap on restart', () => {
  it('returns no admin key on a second start of the same data directory, and the first key still works', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-restart-'));
    try {
      const cfg = loadConfig({ port: '0', dataDir: dir }, { BERTH_LOG_LEVEL: 'silent' });
      const first = await startServer(cfg, { logStream: new PassThrough() });
      const firstKey = first.adminKey;
      assert.ok(firstKey);
      await first.close();
      const second = await startServer(cfg, { logStream: new PassThrough() });
      try {
        assert.equal(second.adminKey, undefined);
        const r = await fetch(`${second.url}/v0/policies`, {
          headers: { authorization: `Bearer ${firstKey}` },
        });
        assert.equal(r.status, 200);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
