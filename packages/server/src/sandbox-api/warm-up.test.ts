import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createApi, createHttpServer } from './app.js';
import { loadDaemonConfig } from './config.js';
import { warmUp } from './warm-up.js';

test('the warm-up calls the daemon’s routes, runs processes, and leaves no process record behind', async () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'berth-warm-up-')));
  const api = createApi(loadDaemonConfig({ BERTH_SANDBOX_PORT: '0', BERTH_SANDBOX_ROOT: root, HOME: root }));
  const server = createHttpServer(api);
  const seen: string[] = [];
  server.on('request', (req) =>
    seen.push(`${req.method} ${req.url?.replace(/\/process\/.+/, '/process/:id')}`),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await warmUp(api, { port: (server.address() as AddressInfo).port });
    assert.ok(seen.includes('POST /process'), seen.join(', '));
    assert.ok(seen.includes('GET /health') && seen.includes('GET /process/:id'), seen.join(', '));
    assert.deepEqual(api.processes.list(), []);
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/process`);
    assert.deepEqual(await res.json(), []);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(root, { recursive: true, force: true });
  }
});

test('a warm-up against a daemon that is gone ends quietly', async () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'berth-warm-up-')));
  const api = createApi(loadDaemonConfig({ BERTH_SANDBOX_PORT: '0', BERTH_SANDBOX_ROOT: root, HOME: root }));
  try {
    await warmUp(api, { socketPath: join(root, 'no-such.sock') });
    assert.deepEqual(api.processes.list(), []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
