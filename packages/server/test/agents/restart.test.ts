// A server killed with SIGKILL while an agent serves traffic, started again on the same data dir: the agent's
// replica outlives the server and is re-adopted (same sandbox, same process: its thread memory goes on), no new
// replica is started, and a replica of a revision no longer served (and a build no server runs) is removed at start.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { berth } from '../berth-cli.js';
import { serve, stopped } from '../serve-process.js';
import { inspectingDriver, removeAllSandboxes, startSandboxServer } from '../sandboxes/support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const TEMPLATES = join(import.meta.dirname, '../../../../templates');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function everySandbox(dataDir: string) {
  const d = await inspectingDriver(dataDir);
  try {
    return (await d.list()).map((i) => ({ id: i.id, pid: i.pid }));
  } finally {
    await d.close();
  }
}

const replicas = async (dataDir: string) =>
  (await everySandbox(dataDir)).filter((i) => i.id.startsWith('wl-'));

test('after a kill -9 of the server during traffic, the agent replica is re-adopted, not replaced', {
  timeout: 300_000,
}, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-agents-restart-'));
  const work = mkdtempSync(join(tmpdir(), 'berth-agents-restart-src-'));
  let server: ChildProcess | undefined;
  try {
    // Built by an in-process server on the same data dir (see test/jobs/restart.test.ts for why), then served by
    // `berth serve`, which re-adopts the replica the first server left.
    const builder = await startSandboxServer({}, dataDir);
    const dir = join(work, 'py');
    cpSync(join(TEMPLATES, 'agent-python'), dir, { recursive: true });
    writeFileSync(join(dir, 'berth.toml'), 'type = "agent"\nname = "py"\n[runtime]\nmemory = 256\n');
    const d = await berth(builder, ['deploy', dir]);
    assert.equal(d.code, 0, d.out);
    await builder.close();
    const adminKey = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    const first = await serve(dataDir);
    server = first.child;
    let url = first.url;
    const call = (inputs: string) =>
      fetch(`${url}/run/default/agents/py`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${adminKey}`,
          'thread-id': 'kept',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ inputs }),
      });
    const untilServed = async () => {
      for (let i = 0; i < 600; i++) {
        const r = await call('ping').catch(() => undefined);
        if (r?.status === 200) return (await r.json()) as { turn: number };
        await r?.body?.cancel();
        await sleep(100);
      }
      assert.fail('the agent was never served');
    };
    const before = await untilServed();
    const adopted = await replicas(dataDir);
    assert.equal(adopted.length, 1, "the first server's replica was taken over by `berth serve`");

    // A replica of a revision no agent serves, and a build no server runs: removed at start.
    const stale = await inspectingDriver(dataDir);
    for (const id of ['wl-000000000000-deadbeef-1', 'bld-000000000000000000000000'])
      await stale.ensure(id, {
        memoryMb: 128,
        pidsMax: 64,
        cpuShares: 64,
        diskMb: 64,
        envs: {},
        image: '',
        volumes: [],
      });
    await stale.close();

    // Traffic in flight when the server dies.
    let stop = false;
    const traffic = (async () => {
      while (!stop)
        await call('load').then(
          (r) => r.body?.cancel(),
          () => undefined,
        );
    })();
    await sleep(300);
    server.kill('SIGKILL');
    await stopped(server);
    stop = true;
    await traffic;
    const turnsBefore = (await replicas(dataDir)).length;
    assert.equal(turnsBefore, 2, 'the replica outlived the server');
    assert.equal((await everySandbox(dataDir)).length, 3);

    const second = await serve(dataDir);
    server = second.child;
    url = second.url;
    const after = await untilServed();
    assert.deepEqual(await replicas(dataDir), adopted, 'same replica sandbox and pid; the stale one removed');
    assert.deepEqual(
      (await everySandbox(dataDir)).map((i) => i.id),
      adopted.map((i) => i.id),
      'no other sandbox is left (the stale build removed)',
    );
    assert.ok(
      after.turn > before.turn,
      `the same process answered (turn ${after.turn} after ${before.turn})`,
    );
  } finally {
    if (server) {
      server.kill('SIGTERM');
      await stopped(server);
    }
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
  }
});
