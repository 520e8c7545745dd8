// Long-lived requests are capped per sandbox so an exec always finds an upstream connection: the real gateway in
// front of a real sandbox API daemon (run without isolation on the fake runtime's socket path).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeDriver } from '../runtime/fake.js';
import { sandboxId } from '../runtime/sandbox-id.js';
import { enc, startSandboxDaemon } from '../test-support/sandbox-daemon.js';
import { isLongLived, MAX_STREAMS_PER_SANDBOX, STREAMS_FULL_RETRY_AFTER_S } from './streams.js';
import { POOL_CONNECTIONS } from './targets.js';
import { smallSandboxSpec } from '../test-support/sandbox-spec.js';
import { gatewayParts } from '../test-support/gateway.js';

test('watches, log streams, stream/follow queries, MCP event streams and tunnels are long-lived; the rest is not', () => {
  for (const [method, path] of [
    ['GET', '/watch/filesystem/%2Ftmp'],
    ['GET', '/watch/filesystem/%2Ftmp?ignore=node_modules'],
    ['GET', '/process/web/logs/stream'],
    ['GET', '/process/web/logs?follow=true'],
    ['GET', '/anything?stream=true'],
    ['GET', '/mcp'],
  ])
    assert.equal(isLongLived(method, path, false), true, path);
  assert.equal(isLongLived('GET', '/terminal/ws', true), true);
  assert.equal(isLongLived('GET', '/port/3000/socket', true), true);
  for (const [method, path] of [
    ['POST', '/process'],
    ['GET', '/process/web/logs'],
    ['GET', '/filesystem/%2Fwatch%2Ffilesystem'],
    ['GET', '/process?stream=false'],
    ['POST', '/mcp'],
  ])
    assert.equal(isLongLived(method, path, false), false, path);
});

test('with the pool full of watch attempts, those past the cap get 429 and an exec still gets through', async () => {
  const parts = await gatewayParts();
  const driver = new FakeDriver(undefined, { socketDir: parts.dir });
  const id = sandboxId('default', 'box');
  const daemon = await startSandboxDaemon({ BERTH_SANDBOX_SOCKET: driver.socketPath(id) });
  await driver.ensure(id, smallSandboxSpec());
  await parts.store.write([
    {
      op: 'create',
      key: { kind: 'Sandbox', workspace: 'default', parent: '', name: 'box' },
      body: { metadata: { name: 'box' }, spec: {}, status: 'DEPLOYED', events: [] },
    },
  ]);
  const served = await parts.serve({ driver });
  const base = `${served.origin}/run/default/sandboxes/box`;
  const adminKey = parts.adminKey;
  const headers = { authorization: `Bearer ${adminKey}` };
  const watches = new AbortController();
  try {
    // As many watches as the pool has connections: uncapped, they would take every one of them.
    const answers = await Promise.all(
      Array.from({ length: POOL_CONNECTIONS }, () =>
        fetch(`${base}/watch/filesystem/${enc(daemon.root)}`, { headers, signal: watches.signal }),
      ),
    );
    const open = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status === 429);
    assert.equal(open.length, MAX_STREAMS_PER_SANDBOX);
    assert.equal(refused.length, POOL_CONNECTIONS - MAX_STREAMS_PER_SANDBOX);
    assert.equal(refused[0].headers.get('retry-after'), String(STREAMS_FULL_RETRY_AFTER_S));
    const problem = await refused[0].json();
    assert.equal(problem.type, 'https://berth.dev/problems/rate-limited');
    assert.equal(problem.error, problem.detail, 'the data plane puts the message where the SDK reads it');

    const exec = await fetch(`${base}/process`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo through', waitForCompletion: true }),
      // Fails the test instead of hanging it when the exec finds no connection.
      signal: AbortSignal.timeout(30_000),
    });
    assert.equal(exec.status, 200);
    assert.match((await exec.json()).logs, /through/);

    // Closing one watch frees its slot.
    await open[0].body?.cancel();
    let again: Response | undefined;
    for (let i = 0; i < 200 && again?.status !== 200; i++) {
      await again?.body?.cancel();
      again = await fetch(`${base}/watch/filesystem/${enc(daemon.root)}`, {
        headers,
        signal: watches.signal,
      });
      if (again.status !== 200) await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(again?.status, 200);
  } finally {
    watches.abort();
    await served.close();
    await daemon.close();
    await parts.close();
  }
});
