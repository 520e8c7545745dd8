// Previews end to end: the unmodified @blaxel/core SDK publishes a port of a real sandbox; plain HTTP clients
// then reach it at the preview's URL, public or with a token, and the sandbox wakes from standby for them.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { getWithHost, type SandboxServer, startSandboxServer } from './support.js';

/** Answers with what it saw, and sets the cookies named in `?setcookie=` (else `app=1`). */
const SERVER = `node -e "require('http').createServer((q, r) => { const c = new URL(q.url, 'http://x').searchParams.getAll('setcookie'); r.setHeader('set-cookie', c.length ? c : 'app=1'); if (q.url.endsWith('/sw.js')) r.setHeader('service-worker-allowed', '/'); r.end(JSON.stringify({ url: q.url, headers: q.headers })); }).on('upgrade', (q, sock) => sock.end('HTTP/1.1 101 Switching Protocols\\r\\nupgrade: websocket\\r\\nconnection: upgrade\\r\\nset-cookie: bl_preview_token=evil; Path=/run/\\r\\n\\r\\n')).listen(3000, '127.0.0.1')"`;

describe('sandbox previews', () => {
  let s: SandboxServer;
  let urls: { publicUrl: string; privateUrl: string; token: string };

  before(async () => {
    s = await startSandboxServer({ BERTH_STANDBY_AFTER: '1' });
    await s.create('pv-box');
    const res = await s.run(`${s.url}/run/default/sandboxes/pv-box/process`, {
      method: 'POST',
      json: { command: SERVER, name: 'web', waitForPorts: [3000] },
    });
    assert.equal(res.status, 200, await res.text());
    const stdout = await runBlaxelScript(join(import.meta.dirname, 'blaxel-previews.mjs'), s, {
      SANDBOX_NAME: 'pv-box',
      PREVIEW_PORT: '3000',
    });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    urls = JSON.parse(line.slice('RESULT '.length));
  });
  after(() => s?.close());

  it('gives each preview a URL on this server', () => {
    assert.equal(urls.publicUrl, `${s.url}/run/default/previews/pv-box/pub`);
    assert.equal(urls.privateUrl, `${s.url}/run/default/previews/pv-box/priv`);
    assert.match(urls.token, /^bpt_/);
  });

  it('serves a public preview to anyone, path and query intact, as localhost:<port>', async () => {
    const res = await fetch(`${urls.publicUrl}/a/b?c=d`);
    assert.equal(res.status, 200);
    const seen = await res.json();
    assert.equal(seen.url, '/a/b?c=d');
    assert.equal(seen.headers.host, 'localhost:3000');
    assert.equal(res.headers.get('set-cookie'), 'app=1; Path=/run/default/previews/pv-box/pub/');
  });

  it("keeps a preview's cookies to its own prefix: no tossing of other previews' token cookies", async () => {
    const toss = [
      'bl_preview_token=evil; Path=/run/; HttpOnly',
      'theme=x; Path=/',
      'wide=1; Domain=127.0.0.1; Path=/run/default/previews/pv-box/pub/',
    ];
    const q = toss.map((c) => `setcookie=${encodeURIComponent(c)}`).join('&');
    const res = await fetch(`${urls.publicUrl}/?${q}`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.headers.getSetCookie(), [
      'bl_preview_token=evil; Path=/run/default/previews/pv-box/pub/; HttpOnly',
      'theme=x; Path=/run/default/previews/pv-box/pub/',
    ]);
  });

  it("scopes the cookies of an upgrade's answer too", async () => {
    const u = new URL(urls.publicUrl);
    const sock = connect(Number(u.port), u.hostname);
    let text = '';
    sock.setEncoding('utf8');
    sock.on('data', (d) => {
      text += d;
    });
    const closed = new Promise((r) => sock.on('close', r));
    sock.write(
      `GET ${u.pathname}/ws HTTP/1.1\r\nhost: ${u.host}\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n`,
    );
    await closed;
    assert.match(text, /^HTTP\/1\.1 101 /);
    assert.match(text, /Set-Cookie: bl_preview_token=evil; Path=\/run\/default\/previews\/pv-box\/pub\/\r\n/);
    assert.doesNotMatch(text, /Path=\/run\/\r\n/);
  });

  it("lets no answer widen a service worker's scope on the server's origin (it would control /console)", async () => {
    // Set by the app itself, and by the preview's own responseHeaders: neither reaches the browser.
    const r = await s.api('/sandboxes/pv-box/previews', {
      method: 'POST',
      json: {
        metadata: { name: 'sw' },
        spec: { port: 3000, public: true, responseHeaders: { 'Service-Worker-Allowed': '/' } },
      },
    });
    assert.equal(r.status, 200, await r.text());
    for (const url of [`${urls.publicUrl}/sw.js`, `${s.url}/run/default/previews/pv-box/sw/app.js`]) {
      const res = await fetch(url);
      assert.equal(res.status, 200, url);
      assert.equal(res.headers.get('service-worker-allowed'), null, url);
    }
  });

  it('refuses a private preview without a token, and with a wrong one', async () => {
    const none = await fetch(`${urls.privateUrl}/`);
    assert.equal(none.status, 401);
    assert.match((await none.json()).detail, /private/);
    const wrong = await fetch(`${urls.privateUrl}/`, { headers: { 'x-blaxel-preview-token': 'bpt_forged' } });
    assert.equal(wrong.status, 401);
  });

  it('serves a private preview with its token, adds its headers, and hides the token from the app', async () => {
    const res = await fetch(`${urls.privateUrl}/x`, { headers: { 'x-blaxel-preview-token': urls.token } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-served-by'), 'berth');
    const seen = await res.json();
    assert.equal(seen.headers['x-from-preview'], 'yes');
    assert.equal(seen.headers['x-blaxel-preview-token'], undefined);
  });

  it('takes the token from the query once, then from the cookie it sets', async () => {
    const first = await fetch(`${urls.privateUrl}/page?bl_preview_token=${urls.token}&keep=1`);
    assert.equal(first.status, 200);
    const seen = await first.json();
    assert.equal(seen.url, '/page?keep=1', 'the token is not passed on');
    const cookies = first.headers.getSetCookie();
    const tokenCookie = cookies.find((c) => c.startsWith('bl_preview_token='));
    assert.ok(tokenCookie, cookies.join(' | '));
    assert.match(tokenCookie, /Path=\/run\/default\/previews\/pv-box\/priv\/; HttpOnly/);
    const next = await fetch(`${urls.privateUrl}/asset.js`, {
      headers: { cookie: `${tokenCookie.split(';')[0]}; theme=dark` },
    });
    assert.equal(next.status, 200);
    assert.equal((await next.json()).headers.cookie, 'theme=dark');
  });

  it('lets a workspace member in with an API key', async () => {
    const res = await s.run(`${urls.privateUrl}/`);
    assert.equal(res.status, 200);
  });

  it('wakes the sandbox from standby for a preview request', async () => {
    await s.waitFor('pv-box', (b) => b.state === 'STANDBY', 'standby');
    const res = await fetch(`${urls.publicUrl}/woken`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).url, '/woken');
  });

  it('stops serving a deleted preview', async () => {
    const del = await s.api('/sandboxes/pv-box/previews/pub', { method: 'DELETE' });
    assert.equal(del.status, 200);
    for (let i = 0; i < 100; i++) {
      if ((await s.api('/sandboxes/pv-box/previews/pub')).status === 404) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal((await fetch(`${urls.publicUrl}/`)).status, 404);
  });
});

describe('sandbox previews by host, and their expiry', () => {
  let s: SandboxServer;

  before(async () => {
    s = await startSandboxServer({ BERTH_INFERENCE_HOST: 'berth.test' });
    await s.create('pv-host');
    const res = await s.run(`${s.url}/run/default/sandboxes/pv-host/process`, {
      method: 'POST',
      json: { command: SERVER, name: 'web', waitForPorts: [3000] },
    });
    assert.equal(res.status, 200, await res.text());
  });
  after(() => s?.close());

  it('serves a preview at pv-<id>.<region>.<inference host> until its ttl runs out, then deletes it', async () => {
    const created = await s.api('/sandboxes/pv-host/previews', {
      method: 'POST',
      json: { metadata: { name: 'web' }, spec: { port: 3000, public: true, ttl: '3s' } },
    });
    assert.equal(created.status, 200);
    const url = new URL((await created.json()).spec.url);
    assert.match(url.hostname, /^pv-[0-9a-f]{20}\.[a-z0-9-]+\.berth\.test$/);
    assert.equal(url.port, String(s.port));
    const ok = await getWithHost(`${s.url}/deep/path?q=1`, url.host);
    assert.equal(ok.status, 200, ok.body);
    assert.equal(JSON.parse(ok.body).url, '/deep/path?q=1');
    const unknown = await getWithHost(`${s.url}/`, url.host.replace(/pv-[0-9a-f]{4}/, 'pv-0000'));
    assert.equal(unknown.status, 404);
    await new Promise((r) => setTimeout(r, 3200));
    const expired = await getWithHost(`${s.url}/`, url.host);
    assert.equal(expired.status, 404);
    // The expiry sweep (every 5 s) may have deleted it already, its host label with it: then the host is no
    // preview's any more. While it still exists, the gateway says why it does not answer.
    if ((await s.api('/sandboxes/pv-host/previews/web')).status === 200)
      assert.match(JSON.parse(expired.body).detail, /expired|not found/);
    // The expiry sweep (every 5 s) deletes it.
    let status = 0;
    for (let i = 0; i < 150 && status !== 404; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await s.api('/sandboxes/pv-host/previews/web')).status;
    }
    assert.equal(status, 404, 'the expired preview was deleted');
  });
});
