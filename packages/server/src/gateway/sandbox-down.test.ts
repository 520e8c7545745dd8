// A sandbox whose daemon is gone, seen through the gateway (startGateway on a plain HTTP server, a real SQLite store,
// the fake runtime with a stand-in daemon): a caller that read FAILED and calls at once gets the 503 naming why, even
// while the gateway's table has not heard of it yet (the store shows a write to readers before its watchers hear of
// it, after the WAL's fsync: under load, tens of milliseconds); a sandbox the store still says serves gets the 502.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sandboxId } from '../runtime/sandbox-id.js';
import { SqliteStore } from '../store/sqlite.js';
import type { Change, ResourceKey } from '../store/store.js';
import { DaemonDriver } from '../test-support/fake-daemon.js';
import { gatewayParts } from '../test-support/gateway.js';
import { smallSandboxSpec } from '../test-support/sandbox-spec.js';

/** A store whose watchers hear late while `hold` is set, as when the WAL's fsync is slow. */
class LateWatchStore extends SqliteStore {
  hold = false;
  private readonly held: (() => void)[] = [];
  override watch(fn: (c: Change) => void) {
    return super.watch((c) => (this.hold ? this.held.push(() => fn(c)) : fn(c)));
  }
  release() {
    this.hold = false;
    for (const f of this.held.splice(0)) f();
  }
}

const KEY: ResourceKey = { kind: 'Sandbox', workspace: 'default', parent: '', name: 'box' };

async function setup() {
  const parts = await gatewayParts({ prefix: 'berth-sbxdown-', store: (path) => new LateWatchStore(path) });
  const store = parts.store as LateWatchStore;
  const driver = new DaemonDriver();
  await driver.ensure(sandboxId('default', 'box'), smallSandboxSpec());
  await store.write([
    { op: 'create', key: KEY, body: { metadata: { name: 'box' }, spec: {}, status: 'DEPLOYED', events: [] } },
  ]);
  const down: string[] = [];
  const served = await parts.serve({ driver, onSandboxDown: (k) => down.push(k.name) });
  const base = `${served.origin}/run/default/sandboxes/box`;
  return {
    store,
    driver,
    down,
    call: (path: string) =>
      fetch(`${base}${path}`, { headers: { authorization: `Bearer ${parts.adminKey}` } }),
    async close() {
      await served.close();
      await driver.close();
      await parts.close();
    },
  };
}

describe('a call to a sandbox whose daemon is gone', () => {
  it('answers the 503 naming the failure the store shows, before the gateway table has heard of it', async () => {
    const env = await setup();
    try {
      assert.equal((await env.call('/health')).status, 200);
      env.store.hold = true;
      env.driver.kill(sandboxId('default', 'box'));
      await env.store.write([
        {
          op: 'update',
          key: KEY,
          mutate: (cur) => ({
            ...cur.body,
            status: 'FAILED',
            events: [{ status: 'FAILED', message: 'out of memory: the sandbox used all of its 256 MB' }],
          }),
        },
      ]);
      const r = await env.call('/process');
      assert.equal(r.status, 503);
      assert.match((await r.json()).error, /sandbox "box" is failed: out of memory/);
      assert.deepEqual(env.down, ['box'], 'its controller is told to look');
      env.store.release();
    } finally {
      await env.close();
    }
  });

  it('answers 502 while the store still says it serves', async () => {
    const env = await setup();
    try {
      assert.equal((await env.call('/health')).status, 200);
      env.driver.kill(sandboxId('default', 'box'));
      const r = await env.call('/process');
      assert.equal(r.status, 502);
      assert.match((await r.json()).error, /sandbox "box" is unreachable/);
      assert.deepEqual(env.down, ['box']);
    } finally {
      await env.close();
    }
  });
});
