// A build runs below every serving sandbox (decision 070): while an agent's build runs, the kernel's CPU weight of
// the build sandbox's cgroup is the lowest it takes, and the agent's replica, started once the build ended, holds
// its memory's weight, far above. Read from the kernel's own files (cgroup v1 cpu.shares; cgroup2 cpu.weight), never
// from Berth's record. The build is held by its own script, which waits for a file the test writes into the build's
// unpacked source on the host (bound read-only at /src), as in build-kill.test.ts.
import assert from 'node:assert/strict';
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
import { after, before, test } from 'node:test';
import { defaultCpuShares } from '../../src/runtime/driver.js';
import { berth, type CliResult } from '../berth-cli.js';
import { inspectingDriver, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';

const WAITING = 'held build: waiting for /src/go';
const MEMORY_MB = 256;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let s: SandboxServer;
let work: string;

before(async () => {
  s = await startSandboxServer();
  work = mkdtempSync(join(tmpdir(), 'berth-build-weight-'));
});
after(async () => {
  await s?.close();
  rmSync(work, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    await sleep(100);
  }
  assert.fail(`never: ${what}`);
}

/** The CPU weight the kernel holds for sandbox `prefix…` of the server: [file, value]. */
async function kernelWeight(prefix: string): Promise<[string, number]> {
  const d = await inspectingDriver(s.dataDir);
  try {
    const info = (await d.list()).find((i) => i.id.startsWith(prefix));
    assert.ok(info, `a sandbox ${prefix}… runs`);
    const dirs = d.cgroup(info.id)?.dirs() ?? [];
    for (const dir of dirs) {
      for (const file of ['cpu.shares', 'cpu.weight']) {
        const p = join(dir, file);
        if (existsSync(p)) return [file, Number(readFileSync(p, 'utf8').trim())];
      }
    }
    assert.fail(`no CPU weight file in ${dirs.join(', ')}`);
  } finally {
    await d.close();
  }
}

test("a build's cgroup holds the lowest CPU weight; the replica it built holds its memory's, above it", {
  timeout: 120_000,
}, async () => {
  const dir = join(work, 'weighed');
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'berth.toml'),
    `type = "agent"\nname = "weighed"\n[runtime]\nmemory = ${MEMORY_MB}\n`,
  );
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'weighed', version: '1.0.0', private: true, scripts: { build: 'sh build.sh' } }),
  );
  writeFileSync(
    join(dir, 'build.sh'),
    `echo '${WAITING}'\nwhile [ ! -e /src/go ]; do sleep 0.1; done\nmkdir -p dist\ncp server.js dist/index.js\n`,
  );
  writeFileSync(
    join(dir, 'server.js'),
    "require('node:http').createServer((q, r) => r.end('ok')).listen(Number(process.env.PORT), '0.0.0.0');\n",
  );
  const deployed: Promise<CliResult> = berth(s, ['deploy', dir]);
  const builds = join(s.dataDir, 'builds', 'workspaces', 'default');
  await until('the build reached its wait', () => {
    const logs = join(builds, 'logs');
    return (
      (existsSync(logs) &&
        readdirSync(logs).some((f) => readFileSync(join(logs, f), 'utf8').includes(WAITING))) ||
      undefined
    );
  });

  const [file, build] = await kernelWeight('bld-');
  // The lowest the kernel takes: cgroup v1 cpu.shares 2, cgroup2 cpu.weight 1.
  assert.equal(build, file === 'cpu.shares' ? 2 : 1, `the build's ${file}`);

  for (const b of readdirSync(join(builds, 'work')))
    writeFileSync(join(builds, 'work', b, 'src', 'go'), '', { mode: 0o644 });
  const r = await deployed;
  assert.equal(r.code, 0, r.out);
  const res = await s.run(`${s.url}/run/default/agents/weighed`);
  assert.equal(res.status, 200, await res.text());

  const [replicaFile, replica] = await kernelWeight('wl-');
  assert.equal(replicaFile, file);
  if (file === 'cpu.shares') assert.equal(replica, defaultCpuShares(MEMORY_MB), "the replica's cpu.shares");
  assert.ok(replica > build, `the replica's ${file} ${replica} is above the build's ${build}`);
});
