// A server killed with SIGKILL in the middle of an agent's build, started again on the same data dir:
// - the build sandbox the dead server left is removed (its process gone), the revision is built again from the
//   stored upload and only then DEPLOYED, answering through the gateway; never DEPLOYED without a built app, and no
//   build sandbox is left once it serves;
// - during a redeploy, the revision that served before the kill serves again while the new one builds (its
//   replica re-adopted: same sandbox, same pid), and is replaced once the new one is built;
// - after a redeploy whose build FAILED, the revision that still served goes on serving across the restart.
// A build is held by its own script, which waits for a file the test writes into the build's unpacked source on the
// host (bound read-only into the build sandbox at /src).
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
const WAITING = 'slow build: waiting for /src/go';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A Node agent without dependencies answering its version; when `slow`, its `npm run build` first waits for
 * /src/go; when 'broken', it fails.
 */
function project(dir: string, version: string, slow: boolean | 'broken') {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'berth.toml'), 'type = "agent"\nname = "slow"\n[runtime]\nmemory = 256\n');
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'slow', version: '1.0.0', private: true, scripts: { build: 'sh build.sh' } }),
  );
  const wait =
    slow === 'broken'
      ? 'echo "this build fails"; exit 3\n'
      : slow
        ? `echo '${WAITING}'\nwhile [ ! -e /src/go ]; do sleep 0.1; done\n`
        : '';
  writeFileSync(join(dir, 'build.sh'), `${wait}mkdir -p dist\ncp server.js dist/index.js\n`);
  writeFileSync(
    join(dir, 'server.js'),
    `require('node:http').createServer((q, r) => r.end(JSON.stringify({ version: '${version}' })))` +
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

/** A `berth serve` on a data dir of its own, and what the tests do with it. */
class Harness {
  readonly dataDir = mkdtempSync(join(tmpdir(), 'berth-build-kill-'));
  readonly work = mkdtempSync(join(tmpdir(), 'berth-build-kill-src-'));
  /** The default workspace's builds (builds/layout.ts). */
  readonly builds = join(this.dataDir, 'builds', 'workspaces', 'default');
  readonly logs = join(this.builds, 'logs');
  server?: ChildProcess;
  url = '';
  adminKey = '';
  private deploys: ChildProcess[] = [];

  async start() {
    const s = await serve(this.dataDir);
    this.server = s.child;
    this.url = s.url;
    this.adminKey = readFileSync(join(this.dataDir, 'admin.key'), 'utf8').trim();
  }

  async kill() {
    const s = this.server;
    assert.ok(s);
    s.kill('SIGKILL');
    await stopped(s);
    // Deploys following the build lose their server mid-way, which is the point.
    await Promise.all(this.deploys.map(stopped));
  }

  /** `berth deploy` of a project; resolves with its exit code (the tests await it or not). */
  deploy(version: string, slow: boolean | 'broken'): Promise<number | null> {
    const dir = join(this.work, version);
    project(dir, version, slow);
    const child = spawn(process.execPath, [CLI, 'deploy', dir], {
      env: {
        ...process.env,
        BERTH_URL: this.url,
        BERTH_API_KEY: this.adminKey,
        BERTH_CONFIG: '/nonexistent',
      },
      stdio: 'ignore',
    });
    this.deploys.push(child);
    return new Promise((r) => child.on('exit', r));
  }

  /** Some build log says the build waits for /cache/go. */
  buildWaits = () =>
    (existsSync(this.logs) &&
      readdirSync(this.logs).some((f) => readFileSync(join(this.logs, f), 'utf8').includes(WAITING))) ||
    undefined;

  /** Lets every held build go on: its source, unpacked under the workspace's work dir, gets the file it waits for. */
  release() {
    const work = join(this.builds, 'work');
    for (const b of readdirSync(work)) writeFileSync(join(work, b, 'src', 'go'), '', { mode: 0o644 });
  }

  async api(path: string) {
    const r = await fetch(`${this.url}/v0${path}`, { headers: { authorization: `Bearer ${this.adminKey}` } });
    return r.json();
  }

  /** A request to the agent through the gateway: its status and, when 200, the version that answered. */
  async call(): Promise<{ status: number; version?: string }> {
    const r = await fetch(`${this.url}/run/default/agents/slow`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.adminKey}` },
      body: '{}',
    });
    if (r.status !== 200) {
      await r.body?.cancel();
      return { status: r.status };
    }
    return { status: 200, version: ((await r.json()) as { version: string }).version };
  }

  /** Waits for the agent to leave BUILDING and DEPLOYING and returns it. */
  settled() {
    return until('the agent left BUILDING and DEPLOYING', async () => {
      const o = await this.api('/agents/slow');
      return ['DEPLOYED', 'FAILED'].includes(o.status) ? o : undefined;
    });
  }

  async close() {
    for (const d of this.deploys) d.kill('SIGKILL');
    if (this.server) {
      this.server.kill('SIGTERM');
      await stopped(this.server);
    }
    await removeAllSandboxes(this.dataDir);
    rmSync(this.dataDir, { recursive: true, force: true });
    rmSync(this.work, { recursive: true, force: true });
  }
}

test('after a kill -9 of the server mid-build, the revision is built again, then DEPLOYED; no build sandbox is left', {
  timeout: 115_000,
}, async () => {
  const h = new Harness();
  try {
    await h.start();
    void h.deploy('v1', true);
    await until('the first build reached its wait', h.buildWaits);
    const [killed] = await sandboxes(h.dataDir, 'bld-');
    assert.ok(killed && alive(killed.pid), 'a build sandbox runs the build');
    await h.kill();
    assert.ok(
      alive(killed.pid),
      'the build sandbox outlived the server (so the next one has to clean it up)',
    );
    rmSync(h.logs, { recursive: true, force: true });

    await h.start();
    // The second server builds again: one build sandbox, a new one; the dead server's is gone with its process.
    await until('the second build reached its wait', h.buildWaits);
    const rebuilding = await sandboxes(h.dataDir, 'bld-');
    assert.equal(rebuilding.length, 1, JSON.stringify(rebuilding));
    assert.notEqual(rebuilding[0].pid, killed.pid, 'the build runs in a new sandbox');
    assert.ok(!alive(killed.pid), 'the build sandbox of the killed server was removed');
    assert.equal((await h.api('/agents/slow')).status, 'BUILDING', 'not DEPLOYED while its build runs');

    h.release();
    const done = await h.settled();
    assert.equal(done.status, 'DEPLOYED', JSON.stringify(done.events.at(-1)));
    const statuses = done.events.map((e: any) => e.status);
    assert.equal(statuses.indexOf('DEPLOYED'), statuses.length - 1, `DEPLOYED only at the end: ${statuses}`);
    assert.ok(!statuses.includes('FAILED'), `${statuses}`);
    const [rev] = await h.api('/agents/slow/revisions');
    const app = join(h.builds, 'apps', rev.app);
    assert.ok(
      existsSync(`${app}.json`) && existsSync(join(app, 'dist', 'index.js')),
      'the revision is built',
    );
    assert.deepEqual(await h.call(), { status: 200, version: 'v1' });
    assert.deepEqual(await sandboxes(h.dataDir, 'bld-'), [], 'no build sandbox is left');
    assert.equal((await sandboxes(h.dataDir, 'wl-')).length, 1, 'one replica serves');
  } finally {
    await h.close();
  }
});

test('a kill -9 during a redeploy: the serving revision is re-adopted and answers while the new one builds again', {
  timeout: 115_000,
}, async () => {
  const h = new Harness();
  try {
    await h.start();
    assert.equal(await h.deploy('v1', false), 0, 'v1 deployed');
    assert.deepEqual(await h.call(), { status: 200, version: 'v1' });
    const serving = await sandboxes(h.dataDir, 'wl-');
    assert.equal(serving.length, 1);
    const v1 = (await h.api('/agents/slow')).activeRevision;

    void h.deploy('v2', true);
    await until('the v2 build reached its wait', h.buildWaits);
    assert.deepEqual(await h.call(), { status: 200, version: 'v1' }, 'v1 serves while v2 builds');
    await h.kill();
    rmSync(h.logs, { recursive: true, force: true });

    await h.start();
    await until('the v2 build started again', h.buildWaits);
    assert.deepEqual(await h.call(), { status: 200, version: 'v1' }, 'v1 serves again while v2 builds again');
    assert.deepEqual(await sandboxes(h.dataDir, 'wl-'), serving, 'the same replica sandbox and pid');
    const mid = await h.api('/agents/slow');
    assert.equal(mid.status, 'BUILDING');
    assert.equal(mid.activeRevision, v1);

    h.release();
    const done = await h.settled();
    assert.equal(done.status, 'DEPLOYED', JSON.stringify(done.events.at(-1)));
    assert.notEqual(done.activeRevision, v1);
    assert.deepEqual(await h.call(), { status: 200, version: 'v2' });
    const now = await sandboxes(h.dataDir, 'wl-');
    assert.equal(now.length, 1, JSON.stringify(now));
    assert.notEqual(now[0].id, serving[0].id, "v1's replica was removed once v2 served");
    assert.deepEqual(await sandboxes(h.dataDir, 'bld-'), [], 'no build sandbox is left');
  } finally {
    await h.close();
  }
});

test('after a failed redeploy, the revision that still serves is re-adopted across a kill -9', {
  timeout: 115_000,
}, async () => {
  const h = new Harness();
  try {
    await h.start();
    assert.equal(await h.deploy('v1', false), 0, 'v1 deployed');
    const serving = await sandboxes(h.dataDir, 'wl-');
    assert.notEqual(await h.deploy('v2', 'broken'), 0, 'the v2 deploy failed');
    const failed = await h.api('/agents/slow');
    assert.equal(failed.status, 'FAILED');
    assert.match(failed.events.at(-1).message, /this build fails/);
    assert.deepEqual(await h.call(), { status: 200, version: 'v1' }, 'v1 serves after the failed build');
    await h.kill();

    await h.start();
    const again = await until('the agent answers again', async () => {
      const r = await h.call();
      return r.status === 503 ? undefined : r;
    });
    assert.deepEqual(again, { status: 200, version: 'v1' }, 'v1 serves after the restart');
    assert.deepEqual(await sandboxes(h.dataDir, 'wl-'), serving, 'the same replica sandbox and pid');
    assert.equal((await h.api('/agents/slow')).status, 'FAILED', 'still FAILED: the failure stays reported');
  } finally {
    await h.close();
  }
});
