// A server killed with SIGKILL in the middle of an agent's build, started again on the same data dir: the build
// sandbox the dead server left is removed (its process gone), the revision is built again from the stored upload
// and only then DEPLOYED, answering through the gateway; it is never DEPLOYED without a built app, and no build
// sandbox is left once it serves. The build is held by its own script, which waits for a file the test writes into
// the workspace's dependency cache (bound into the build sandbox at /cache).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { serve, stopped } from '../serve-process.js';
import { inspectingDriver, removeAllSandboxes } from '../sandboxes/support.js';

const CLI = join(import.meta.dirname, '../../../cli/bin/berth.mjs');
const WAITING = 'slow build: waiting for /cache/go';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A Node agent without dependencies whose `npm run build` waits for /cache/go, then writes dist/index.js. */
function slowProject(dir: string) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'berth.toml'), 'type = "agent"\nname = "slow"\n[runtime]\nmemory = 256\n');
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'slow', version: '1.0.0', private: true, scripts: { build: 'sh build.sh' } }),
  );
  writeFileSync(
    join(dir, 'build.sh'),
    `echo '${WAITING}'\nwhile [ ! -e /cache/go ]; do sleep 0.1; done\nmkdir -p dist\ncp server.js dist/index.js\n`,
  );
  writeFileSync(
    join(dir, 'server.js'),
    `require('node:http').createServer((q, r) => r.end(JSON.stringify({ built: true })))` +
      `.listen(Number(process.env.PORT), '0.0.0.0');\n`,
  );
}

async function sandboxes(dataDir: string, prefix: string) {
  const d = await inspectingDriver(dataDir);
  try {
    return (await d.list()).filter((i) => i.id.startsWith(prefix)).map((i) => ({ id: i.id, pid: i.pid }));
  } finally {
    await d.close();
  }
}

/** The process exists and is not a zombie (a dead sandbox's process may wait for its reaper a moment). */
const alive = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
};

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (let i = 0; i < 450; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    await sleep(100);
  }
  assert.fail(`never: ${what}`);
}

test('after a kill -9 of the server mid-build, the revision is built again, then DEPLOYED; no build sandbox is left', {
  timeout: 115_000,
}, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-build-kill-'));
  const work = mkdtempSync(join(tmpdir(), 'berth-build-kill-src-'));
  const logs = join(dataDir, 'builds', 'logs');
  const buildWaits = () => {
    if (!existsSync(logs)) return undefined;
    return readdirSync(logs).some((f) => readFileSync(join(logs, f), 'utf8').includes(WAITING)) || undefined;
  };
  let server: ChildProcess | undefined;
  let deploy: ChildProcess | undefined;
  try {
    const first = await serve(dataDir);
    server = first.child;
    const adminKey = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    slowProject(join(work, 'slow'));
    // `berth deploy` uploads and then follows the build; it loses its server mid-way, which is the point.
    deploy = spawn(process.execPath, [CLI, 'deploy', join(work, 'slow')], {
      env: { ...process.env, BERTH_URL: first.url, BERTH_API_KEY: adminKey, BERTH_CONFIG: '/nonexistent' },
      stdio: 'ignore',
    });
    await until('the first build reached its wait', buildWaits);
    const [killed] = await sandboxes(dataDir, 'bld-');
    assert.ok(killed && alive(killed.pid), 'a build sandbox runs the build');
    server.kill('SIGKILL');
    await stopped(server);
    await stopped(deploy);
    assert.ok(
      alive(killed.pid),
      'the build sandbox outlived the server (so the next one has to clean it up)',
    );
    rmSync(logs, { recursive: true, force: true });

    const second = await serve(dataDir);
    server = second.child;
    const api = async (path: string) =>
      (await fetch(`${second.url}/v0${path}`, { headers: { authorization: `Bearer ${adminKey}` } })).json();
    // The second server builds again: one build sandbox, a new one; the dead server's is gone with its process.
    await until('the second build reached its wait', buildWaits);
    const rebuilding = await sandboxes(dataDir, 'bld-');
    assert.equal(rebuilding.length, 1, JSON.stringify(rebuilding));
    assert.notEqual(rebuilding[0].pid, killed.pid, 'the build runs in a new sandbox');
    assert.ok(!alive(killed.pid), 'the build sandbox of the killed server was removed');
    const mid = await api('/agents/slow');
    assert.equal(mid.status, 'BUILDING', 'not DEPLOYED while its build runs');

    writeFileSync(join(dataDir, 'builds', 'deps', 'default', 'go'), '', { mode: 0o644 });
    const done = await until('the agent left BUILDING and DEPLOYING', async () => {
      const o = await api('/agents/slow');
      return ['DEPLOYED', 'FAILED'].includes(o.status) ? o : undefined;
    });
    assert.equal(done.status, 'DEPLOYED', JSON.stringify(done.events.at(-1)));
    const statuses = done.events.map((e: any) => e.status);
    assert.equal(statuses.indexOf('DEPLOYED'), statuses.length - 1, `DEPLOYED only at the end: ${statuses}`);
    assert.ok(!statuses.includes('FAILED'), `${statuses}`);
    const [rev] = await api('/agents/slow/revisions');
    const app = join(dataDir, 'builds', 'apps', rev.app);
    assert.ok(
      existsSync(`${app}.json`) && existsSync(join(app, 'dist', 'index.js')),
      'the revision is built',
    );
    const res = await fetch(`${second.url}/run/default/agents/slow`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}` },
      body: '{}',
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { built: true });
    assert.deepEqual(await sandboxes(dataDir, 'bld-'), [], 'no build sandbox is left');
    assert.equal((await sandboxes(dataDir, 'wl-')).length, 1, 'one replica serves');
  } finally {
    deploy?.kill('SIGKILL');
    if (server) {
      server.kill('SIGTERM');
      await stopped(server);
    }
    await removeAllSandboxes(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
});
