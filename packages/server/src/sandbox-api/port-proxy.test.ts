import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { startSandboxDaemon, type TestDaemon } from '../test-support/sandbox-daemon.js';

let d: TestDaemon;
let app: Server;
let port: number;
before(async () => {
  d = await startSandboxDaemon();
  // Stands for a web app running inside the sandbox.
  app = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      res.setHeader('x-app', 'yes');
      res.end(
        JSON.stringify({
          method: req.method,
          url: req.url,
          host: req.headers.host,
          auth: req.headers['x-blaxel-authorization'],
          body,
        }),
      );
    });
  });
  const wss = new WebSocketServer({ server: app });
  wss.on('connection', (ws) => ws.on('message', (m) => ws.send(`echo:${m}`)));
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  port = (app.address() as AddressInfo).port;
});
after(async () => {
  app.closeAllConnections();
  await new Promise((r) => app.close(r));
  await d.close();
});

describe('port proxy', () => {
  test('a request to /port/{n}/path reaches the app with its path, query, method and body', async () => {
    const res = await d.fetch(`/port/${port}/api/items?x=1&y=%2F`, {
      method: 'POST',
      body: 'payload',
      headers: { 'x-blaxel-authorization': 'Bearer secret' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-app'), 'yes');
    const seen = (await res.json()) as Record<string, string | undefined>;
    assert.equal(seen.method, 'POST');
    assert.equal(seen.url, '/api/items?x=1&y=%2F');
    assert.equal(seen.host, `localhost:${port}`);
    assert.equal(seen.body, 'payload');
    assert.equal(seen.auth, undefined, 'Berth credentials are not passed to the app');
  });

  test('/port/{n} alone is the app root', async () => {
    const seen = (await (await d.fetch(`/port/${port}`)).json()) as { url: string };
    assert.equal(seen.url, '/');
  });

  test('a WebSocket upgrade is spliced through to the app', async () => {
    const ws = new WebSocket(`${d.url.replace('http', 'ws')}/port/${port}/socket`);
    await new Promise((r, j) => {
      ws.once('open', r);
      ws.once('error', j);
    });
    const reply = new Promise<string>((r) => ws.once('message', (m) => r(m.toString())));
    ws.send('ping');
    assert.equal(await reply, 'echo:ping');
    ws.close();
  });

  test('nothing listening is a 502; a bad port is a 400', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const free = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const res = await d.fetch(`/port/${free}/`);
    assert.equal(res.status, 502);
    assert.ok(((await res.json()) as { error: string }).error);
    assert.equal((await d.fetch('/port/99999/')).status, 400);
  });
});
