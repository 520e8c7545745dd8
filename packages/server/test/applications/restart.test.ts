// A server stopped while an application serves, started again on the same data dir: the application's replica is
// re-adopted (same sandbox, same process: the count it keeps in memory goes on), no new replica is started
// (decision 054, second pass; decision 029 for agents).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  nodeLayer,
  Pusher,
  startRegistry,
  toolsLayer,
} from '../../src/runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import {
  inspectingDriver,
  removeAllSandboxes,
  type SandboxServer,
  startSandboxServer,
} from '../sandboxes/support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const COUNTER = `let n = 0; require('node:http').createServer((req, res) => {
  res.end(JSON.stringify({ n: ++n, pid: process.pid }));
}).listen(3000, '0.0.0.0');`;

async function replicas(dataDir: string) {
  const d = await inspectingDriver(dataDir);
  try {
    return (await d.list()).filter((i) => i.id.startsWith('wl-')).map((i) => ({ id: i.id, pid: i.pid }));
  } finally {
    await d.close();
  }
}

async function served(s: SandboxServer): Promise<{ n: number }> {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${s.url}/run/default/applications/counter/`).catch(() => undefined);
    if (r?.status === 200) return (await r.json()) as { n: number };
    await r?.body?.cancel();
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.fail('the application was never served');
}

test('after a server restart, the application replica is re-adopted, not started again', {
  timeout: 300_000,
}, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-apps-restart-'));
  const reg = await startRegistry();
  let s: SandboxServer | undefined;
  try {
    s = await startSandboxServer(OUTBOUND_LOOPBACK, dataDir);
    const pushed = await new Pusher(reg).image(
      'test/counter',
      'v1',
      [await toolsLayer('app-node'), await nodeLayer()],
      { Env: ['PATH=/opt/node/bin:/bin'], Cmd: ['node', '-e', COUNTER] },
    );
    const pulled = await s.api('/images', { method: 'POST', json: { reference: pushed.reference } });
    assert.equal(pulled.status, 200, await pulled.text());
    const created = await s.api('/applications', {
      method: 'POST',
      json: {
        metadata: { name: 'counter' },
        spec: { image: pushed.reference, port: 3000, memory: 256, envs: [{ name: 'K', value: 'v' }] },
      },
    });
    assert.equal(created.status, 200, await created.text());
    const before = await served(s);
    await served(s);
    const running = await replicas(dataDir);
    assert.equal(running.length, 1, JSON.stringify(running));
    await s.close();
    s = undefined;

    s = await startSandboxServer(OUTBOUND_LOOPBACK, dataDir);
    const after = await served(s);
    assert.deepEqual(await replicas(dataDir), running, 'the same replica sandbox and process, no other');
    assert.ok(after.n > before.n + 1, `the same process answered (request ${after.n} after ${before.n})`);
    const app = await (await s.api('/applications/counter')).json();
    assert.equal(app.status, 'DEPLOYED', JSON.stringify(app.events));
  } finally {
    await s?.close();
    await reg.stop();
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
  }
});
