// The two pools (needs root): ready network namespaces, and warm sandboxes assigned on create.
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SandboxCgroup } from './cgroup.js';
import { hostTools, sleep } from './exec.js';
import { LAYERS_DIR, sandboxPaths } from './host.js';
import { readRecord, writeRecord } from './state.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { claimedSlots, transferSlot } from './slots.js';
import { callSocket, makeMiniDaemonCodeDir, sandboxExec } from './test-support/mini-daemon.js';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';

const T = { timeout: 90_000 };
const spec = smallSandboxSpec;

const ownedUnder = (dir: string) => claimedSlots().filter((s) => s.owner.startsWith(`${dir}/`));

/** Whatever happened in the test, nothing of it stays on the host. */
async function cleanUp(driver: LinuxDriver, dataDir: string): Promise<void> {
  for (const s of await driver.list()) await driver.remove(s.id);
  await driver.close();
  rmSync(dataDir, { recursive: true, force: true });
}

test('a create takes a pooled network, which refills; close deletes it all, host tools too', T, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-pool-'));
  let helpers: number[] = [];
  const driver = await createLinuxDriver({
    dataDir,
    codeDir: makeMiniDaemonCodeDir(dataDir),
    netPoolSize: 2,
  });
  try {
    await driver.poolsIdle();
    assert.equal(driver.netPool.readyCount, 2);
    const pooled = ownedUnder(join(dataDir, 'pool')).map((s) => s.slot);
    const info = await driver.ensure('p1', spec());
    const slot = Number(driver.cgroup('p1')!.name.slice(2));
    assert.ok(pooled.includes(slot), 'the sandbox got a pooled slot');
    assert.equal((await callSocket(info.socketPath, 'GET', '/health')).status, 200);
    await driver.poolsIdle();
    assert.equal(driver.netPool.readyCount, 2, `refilled (${driver.netPool.lastError?.message})`);
    await driver.remove('p1');
  } finally {
    helpers = hostTools.pids;
    await cleanUp(driver, dataDir);
  }
  assert.deepEqual(ownedUnder(dataDir), [], 'no slot left claimed');
  assert.ok(helpers.length, 'host-tool processes ran the pool');
  assert.deepEqual(hostTools.pids, []);
  for (const p of helpers)
    assert.ok(!existsSync(`/proc/${p}`), 'the driver that used them closed: they ended');
  for (const n of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) assert.ok(!n.includes(dataDir));
});

test('a warm sandbox is assigned to a create with the spec envs, limits and disk cap', T, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-'));
  const driver = await createLinuxDriver({
    dataDir,
    codeDir: makeMiniDaemonCodeDir(dataDir),
    netPoolSize: 0,
    warmPoolSize: 1,
  });
  try {
    await driver.poolsIdle();
    assert.equal(driver.warmPool.readyCount, 1);
    // cgroup v1 hosts (these machines): cpu.shares says the CPU weight.
    const cpuShares = (cg: SandboxCgroup) => {
      const dir = cg.dirs().find((d) => d.startsWith('/sys/fs/cgroup/cpu/'));
      return dir ? Number(readFileSync(join(dir, 'cpu.shares'), 'utf8')) : undefined;
    };
    const waiting = new SandboxCgroup(driver.cgroupHost, driver.warmPool.readyRecords()[0].name);
    if (cpuShares(waiting) !== undefined)
      assert.equal(cpuShares(waiting), 2, 'a waiting sandbox yields the CPU');
    const started = performance.now();
    const info = await driver.ensure('w1', spec({ memoryMb: 128, diskMb: 32, envs: { COLOR: 'teal' } }));
    t.diagnostic(`create from the warm pool: ${(performance.now() - started).toFixed(1)} ms`);
    assert.equal(info.socketPath, driver.socketPath('w1'));
    assert.equal(info.state, 'running');
    // The pool sent it one /health while it waited (its HTTP path compiled before anyone called it).
    assert.equal((await callSocket(info.socketPath, 'GET', '/health')).body.calls, 2);
    const run = async (cmd: string) => (await sandboxExec(info.socketPath, cmd)).stdout.trim();
    assert.equal(await run('echo $COLOR $BERTH_SANDBOX_ID'), 'teal w1');
    assert.equal(await run("df -m /workspace | awk 'NR==2{print $2}'"), '32');
    assert.equal((await driver.stats('w1'))!.memoryLimitBytes, 128 * 1024 * 1024);
    if (cpuShares(waiting) !== undefined) assert.equal(cpuShares(driver.cgroup('w1')!), spec({}).cpuShares);
    assert.deepEqual(
      (await driver.list()).map((s) => s.id),
      ['w1'],
    );
    assert.ok(existsSync(join(dataDir, 'sandboxes', 'w1', 'state.json')));
    await driver.poolsIdle();
    assert.equal(driver.warmPool.readyCount, 1, `refilled (${driver.warmPool.lastError?.message})`);
    // A spec with a volume takes the warm sandbox too: its volume is mounted into the running sandbox, id-mapped,
    // so what root inside writes is stored as uid 0 on the host.
    const vol = mkdtempSync(join(dataDir, 'vol-'));
    const volSpec = spec({ volumes: [{ hostPath: vol, mountPath: '/data', readOnly: false }] });
    const warmVol = await driver.ensure('w2', volSpec);
    assert.equal(driver.warmPool.readyCount, 0, 'the warm sandbox was taken');
    assert.equal(
      (await sandboxExec(warmVol.socketPath, 'echo hi > /data/f && cat /data/f && stat -c %u /data/f'))
        .stdout,
      'hi\n0\n',
    );
    assert.equal(readFileSync(join(vol, 'f'), 'utf8'), 'hi\n');
    assert.equal(statSync(join(vol, 'f')).uid, 0, 'stored as uid 0, not as the sandbox host uid');
    // A record a killed server left before the mounts were done is replaced, never adopted without them.
    const rec = JSON.parse(readFileSync(join(dataDir, 'sandboxes', 'w2', 'state.json'), 'utf8'));
    writeFileSync(
      join(dataDir, 'sandboxes', 'w2', 'state.json'),
      JSON.stringify({ ...rec, mountsPending: true }),
    );
    const again = await driver.ensure('w2', volSpec);
    assert.notEqual(again.pid, warmVol.pid, 'a new sandbox');
    assert.equal((await sandboxExec(again.socketPath, 'cat /data/f')).stdout, 'hi\n');
    await driver.remove('w1');
    await driver.remove('w2');
  } finally {
    await cleanUp(driver, dataDir);
  }
  assert.deepEqual(ownedUnder(dataDir), [], 'warm sandboxes removed on close');
});

test(
  'a burst takes the pool the last minute grew (its base on top), then is served cold with one refill at a time',
  T,
  async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-burst-'));
    // Every create of this test is within a minute of the one before: one burst, whatever the machine's load.
    const driver = await createLinuxDriver({
      dataDir,
      codeDir: makeMiniDaemonCodeDir(dataDir),
      netPoolSize: 2,
      warmPoolSize: 1,
      warmPoolMax: 8,
      refillDelayMs: 60_000,
    });
    try {
      await driver.warmPool.whenIdle();
      assert.equal(driver.warmPool.readyCount, 1, `the base (${driver.warmPool.lastError?.message})`);
      // A lone create (none before it) refills at once, to the base on top of the window's one create.
      await driver.ensure('a0', spec());
      await driver.poolsIdle();
      assert.equal(
        driver.warmPool.readyCount,
        2,
        `one for the last minute's create and the base (${driver.warmPool.lastError?.message})`,
      );
      // Four back to back: two from the pool, two past it. While they come, at most one warm sandbox is started.
      let mostStarting = 0;
      const watch = setInterval(() => {
        mostStarting = Math.max(mostStarting, driver.warmPool.startingCount);
      }, 1);
      const served = [];
      try {
        for (const id of ['b1', 'b2', 'b3', 'b4']) {
          served.push(await driver.ensure(id, spec()));
          mostStarting = Math.max(mostStarting, driver.warmPool.startingCount);
        }
      } finally {
        clearInterval(watch);
      }
      // Exactly one: the pool, emptied by b2 at the latest, starts a replacement at once (counted right after that
      // create), and never a second beside it while the creates keep coming.
      assert.equal(mostStarting, 1, 'one refill beside the burst, never more');
      for (const info of served) {
        assert.equal(info.state, 'running');
        assert.equal((await callSocket(info.socketPath, 'GET', '/health')).status, 200);
      }
    } finally {
      await cleanUp(driver, dataDir);
    }
    assert.deepEqual(ownedUnder(dataDir), [], 'no slot left claimed');
  },
);

test(
  'a cold start past the emptied pool is part of the burst: the full refill waits for its end',
  T,
  async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-cold-'));
    // A burst's pause is 300 ms without a create; the cold start below takes 2 s, back-to-back creates far less.
    const driver = await createLinuxDriver({
      dataDir,
      codeDir: makeMiniDaemonCodeDir(dataDir),
      netPoolSize: 2,
      warmPoolSize: 3,
      warmPoolMax: 8,
      refillDelayMs: 300,
    });
    try {
      await driver.warmPool.whenIdle();
      assert.equal(driver.warmPool.readyCount, 3, `the base (${driver.warmPool.lastError?.message})`);
      let mostStarting = 0;
      const watch = setInterval(() => {
        mostStarting = Math.max(mostStarting, driver.warmPool.startingCount);
      }, 1);
      const slow = spec({ envs: { MINI_DAEMON_LISTEN_AFTER_MS: '2000' } });
      try {
        // Three from the pool (the third empties it and starts one replacement), then one cold and slow.
        for (const id of ['c1', 'c2', 'c3', 'c4']) {
          await driver.ensure(id, slow);
          mostStarting = Math.max(mostStarting, driver.warmPool.startingCount);
        }
      } finally {
        clearInterval(watch);
      }
      assert.equal(mostStarting, 1, 'no full refill while the cold start was under way');
      // Once the burst has paused, the pool is refilled to the base on top of the window's four creates.
      await driver.poolsIdle();
      assert.equal(driver.warmPool.readyCount, 7, `refilled (${driver.warmPool.lastError?.message})`);
    } finally {
      await cleanUp(driver, dataDir);
    }
    assert.deepEqual(ownedUnder(dataDir), [], 'no slot left claimed');
  },
);

test(
  "after a create of a burst, a gap longer than a lone create's refill delay starts no refill",
  T,
  async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-gap-'));
    // Networks to spare after the pool's starts took theirs: an empty net pool makes a lone create refill at once.
    const driver = await createLinuxDriver({
      dataDir,
      codeDir: makeMiniDaemonCodeDir(dataDir),
      netPoolSize: 8,
      warmPoolSize: 3,
      warmPoolMax: 8,
      refillDelayMs: 300,
    });
    try {
      await driver.poolsIdle();
      assert.ok(driver.netPool.readyCount > 0, 'networks to spare');
      assert.equal(driver.warmPool.readyCount, 3, `the base (${driver.warmPool.lastError?.message})`);
      await driver.ensure('g1', spec()); // a lone create: its refill would come 300 ms later
      await driver.ensure('g2', spec()); // right after it: a burst, whose pause is four times that
      assert.equal(driver.warmPool.readyCount, 1);
      // A client's answer, first exec and next POST under load: longer than 300 ms, shorter than the burst's pause.
      await sleep(600);
      assert.equal(driver.warmPool.startingCount, 0, 'no refill within the burst');
      assert.equal(driver.warmPool.readyCount, 1);
      // The pause, then the full refill: the base on top of the two creates.
      await driver.poolsIdle();
      assert.equal(driver.warmPool.readyCount, 5, `refilled (${driver.warmPool.lastError?.message})`);
    } finally {
      await cleanUp(driver, dataDir);
    }
    assert.deepEqual(ownedUnder(dataDir), [], 'no slot left claimed');
  },
);

/** The cap (MB) the kernel has for a layer, from the tmpfs's `size=` in /proc/self/mountinfo. */
function layerCapMb(name: string): number | undefined {
  const mountPoint = join(LAYERS_DIR, name);
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[4] !== mountPoint) continue;
    const superOptions = f[f.indexOf('-', 6) + 3] ?? '';
    const kb = /(?:^|,)size=(\d+)k(?:,|$)/.exec(superOptions)?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  }
  return undefined;
}

test(
  'warm layers wait at the disk size creates ask for: the configured default, then the latest create',
  T,
  async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-disk-'));
    const driver = await createLinuxDriver({
      dataDir,
      codeDir: makeMiniDaemonCodeDir(dataDir),
      netPoolSize: 0,
      warmPoolSize: 1,
      warmDiskMb: 64,
    });
    try {
      await driver.poolsIdle();
      const [waiting] = driver.warmPool.readyRecords();
      assert.ok(waiting, `a warm sandbox (${driver.warmPool.lastError?.message})`);
      assert.equal(layerCapMb(waiting.name), 64, 'mounted at the default sandbox size');
      // A create of the default size takes it and its layer keeps exactly the spec's cap.
      const d1 = await driver.ensure('d1', spec({ diskMb: 64 }));
      assert.equal(d1.pid, waiting.pid, 'the warm sandbox was taken');
      assert.equal(layerCapMb(driver.cgroup('d1')!.name), 64);
      assert.equal(
        (await sandboxExec(d1.socketPath, "df -m /workspace | awk 'NR==2{print $2}'")).stdout,
        '64\n',
      );
      // Another size is still the spec's (remounted), and the pool's next sandboxes wait at that size.
      await driver.poolsIdle();
      const d2 = await driver.ensure('d2', spec({ diskMb: 48 }));
      assert.equal(layerCapMb(driver.cgroup('d2')!.name), 48);
      assert.equal(
        (await sandboxExec(d2.socketPath, "df -m /workspace | awk 'NR==2{print $2}'")).stdout,
        '48\n',
      );
      await driver.poolsIdle();
      const [next] = driver.warmPool.readyRecords();
      assert.ok(next, `refilled (${driver.warmPool.lastError?.message})`);
      assert.equal(layerCapMb(next.name), 48, "the refill mounts at the latest create's size");
      // A create of another size than the one waiting gets its own cap, never the pool's.
      const d3 = await driver.ensure('d3', spec({ diskMb: 40 }));
      assert.equal(d3.pid, next.pid);
      assert.equal(layerCapMb(driver.cgroup('d3')!.name), 40);
    } finally {
      await cleanUp(driver, dataDir);
    }
    assert.deepEqual(ownedUnder(dataDir), [], 'no slot left claimed');
  },
);

test('a warm sandbox left by a killed process is adopted only if its API socket answers', T, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-adopt-'));
  const opts = { dataDir, codeDir: makeMiniDaemonCodeDir(dataDir), netPoolSize: 0, warmPoolSize: 1 };
  let driver = await createLinuxDriver(opts);
  try {
    await driver.poolsIdle();
    const [rec] = driver.warmPool.readyRecords();
    assert.ok(rec, `a warm sandbox (${driver.warmPool.lastError?.message})`);
    // As a kill -9 during a refill leaves one: its process runs, its record is there, its socket link is not
    // (waitForSocket had not made it). Here: moved under a dead process's name, whose socket path has no link.
    const from = join(dataDir, 'warm', readdirSync(join(dataDir, 'warm'))[0]);
    const to = join(dataDir, 'warm', '1.1.0');
    renameSync(from, to);
    await transferSlot(rec.slot, from, to);
    await driver.close(); // its pool's entry is gone from disk: nothing of it is torn down
    driver = await createLinuxDriver(opts);
    assert.ok(
      !driver.warmPool.readyRecords().some((r) => r.pid === rec.pid),
      'the sandbox without a socket is not adopted',
    );
    assert.ok(!existsSync(to), 'it was torn down');
    const info = await driver.ensure('a1', spec());
    assert.equal((await callSocket(info.socketPath, 'GET', '/health')).status, 200);
    await driver.remove('a1');
  } finally {
    await cleanUp(driver, dataDir);
  }
  assert.deepEqual(ownedUnder(dataDir), [], 'no slot left claimed');
});

test(
  'a warm sandbox killed with its server after its daemon listened makes a finished sandbox, kept as it is',
  T,
  async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-pending-'));
    const opts = { dataDir, codeDir: makeMiniDaemonCodeDir(dataDir), netPoolSize: 0, warmPoolSize: 1 };
    let driver = await createLinuxDriver(opts);
    try {
      await driver.poolsIdle();
      const [rec] = driver.warmPool.readyRecords();
      assert.ok(rec, `a warm sandbox (${driver.warmPool.lastError?.message})`);
      // As a kill -9 of the server leaves one between the daemon's first answer and the record's last write: the
      // socket answers, the record still says it is pending. Moved under a dead process's name, socket included.
      const name = readdirSync(join(dataDir, 'warm'))[0];
      const from = join(dataDir, 'warm', name);
      const to = join(dataDir, 'warm', '1.1.0');
      writeRecord(from, { ...readRecord(from)!, socketPending: true });
      renameSync(from, to);
      renameSync(
        sandboxPaths(dataDir, `warm/${name}`).socketPath,
        sandboxPaths(dataDir, 'warm/1.1.0').socketPath,
      );
      await transferSlot(rec.slot, from, to);
      await driver.close();
      driver = await createLinuxDriver(opts);
      assert.ok(
        driver.warmPool.readyRecords().some((r) => r.pid === rec.pid),
        'adopted: its socket answers',
      );
      const first = await driver.ensure('p1', spec());
      assert.equal(first.pid, rec.pid, 'the create took the adopted warm sandbox');
      assert.equal((await driver.inspect('p1'))?.unfinished, undefined, 'not a start cut short');
      // What its controller does next (a recheck, a restart of the server): the same sandbox, not a fresh one.
      assert.equal((await driver.ensure('p1', spec())).pid, rec.pid);
      assert.equal((await callSocket(first.socketPath, 'GET', '/health')).status, 200);
      await driver.remove('p1');
    } finally {
      await cleanUp(driver, dataDir);
    }
    assert.deepEqual(ownedUnder(dataDir), [], 'no slot left claimed');
  },
);
