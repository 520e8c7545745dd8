import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createApi, createHttpServer } from './app.js';
import { loadDaemonConfig } from './config.js';
import { warmUp } from './warm-up.js';

test('the warm-up sends the daemon one GET /health and starts no process', async () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'berth-warm-up-')));
  const api = createApi(loadDaemonConfig({ BERTH_SANDBOX_PORT: '0', BERTH_SANDBOX_ROOT: root, HOME: root }));
  const server = createHttpServer(api);
  const seen: string[] = [];
  server.on('request', (req) => seen.push(`${req.method} ${req.url}`));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await warmUp({ port: (server.address() as AddressInfo).port });
    assert.deepEqual(seen, ['GET /health']);
    assert.deepEqual(api.processes.list(), []);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(root, { recursive: true, force: true });
  }
});

test('a warm-up against a daemon that is not there ends quietly', async () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'berth-warm-up-')));
  try {
    await warmUp({ socketPath: join(root, 'no-such.sock') });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
