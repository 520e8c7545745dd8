// The console's static files: only the built files, each with the page's strict CSP; hashed assets cached for a
// year, the page revalidated; any other path under /console is the app's page; nothing else of the disk is served.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { CONSOLE_CSP, registerConsole } from './console.js';

describe('the console route', () => {
  let dir: string;
  let app: FastifyInstance;
  const PAGE = '<!doctype html><script type="module" src="/console/assets/index-abc123.js"></script>';
  const SCRIPT = `console.log(${JSON.stringify('x'.repeat(4000))});`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-console-route-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), PAGE);
    writeFileSync(join(dir, 'assets/index-abc123.js'), SCRIPT);
    writeFileSync(join(dir, 'favicon.svg'), '<svg/>');
    writeFileSync(join(dir, '..', 'outside-console.txt'), 'not served');
    app = Fastify({ routerOptions: { ignoreTrailingSlash: true } });
    registerConsole(app, { dir });
    await app.ready();
  });
  after(async () => {
    await app.close();
    rmSync(join(dir, '..', 'outside-console.txt'), { force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the page with a CSP that allows no inline script, no framing and no other origin', async () => {
    const r = await app.inject({ url: '/console/' });
    assert.equal(r.statusCode, 200);
    assert.equal(r.body, PAGE);
    assert.equal(r.headers['content-security-policy'], CONSOLE_CSP);
    for (const d of [
      "script-src 'self'",
      "default-src 'none'",
      "frame-ancestors 'none'",
      "connect-src 'self'",
    ])
      assert.ok(CONSOLE_CSP.includes(d), d);
    assert.ok(!CONSOLE_CSP.includes('unsafe'), 'no unsafe-inline or unsafe-eval');
    assert.equal(r.headers['x-frame-options'], 'DENY');
    assert.equal(r.headers['cache-control'], 'no-cache');
  });

  it('caches hashed assets for a year, compressed when the client takes it, and answers 304 to a revalidation', async () => {
    const r = await app.inject({
      url: '/console/assets/index-abc123.js',
      headers: { 'accept-encoding': 'br, gzip' },
    });
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(r.headers['content-encoding'], 'br');
    assert.match(String(r.headers['content-type']), /^text\/javascript/);
    const again = await app.inject({
      url: '/console/assets/index-abc123.js',
      headers: { 'if-none-match': String(r.headers.etag) },
    });
    assert.equal(again.statusCode, 304);
  });

  it("answers the app's page for its own paths, 404 for a missing asset, and never a file outside the build", async () => {
    for (const url of ['/console/sandboxes/box/terminal', '/console/jobs']) {
      const r = await app.inject({ url });
      assert.equal(r.statusCode, 200, url);
      assert.equal(r.body, PAGE, url);
    }
    assert.equal((await app.inject({ url: '/console/assets/index-old999.js' })).statusCode, 404);
    for (const url of [
      '/console/../outside-console.txt',
      '/console/%2e%2e/outside-console.txt',
      '/console/..%2foutside-console.txt',
    ]) {
      const r = await app.inject({ url });
      assert.ok(!r.body.includes('not served'), url);
    }
  });

  it('sends /console to /console/', async () => {
    assert.equal((await app.inject({ url: '/console' })).headers.location, '/console/');
  });

  it('says how to build the console when it is not built', async () => {
    const bare = Fastify();
    registerConsole(bare, { dir: join(dir, 'nothing-here') });
    const r = await bare.inject({ url: '/console/' });
    assert.equal(r.statusCode, 404);
    assert.match(r.body, /npm run build/);
    await bare.close();
  });
});
