// The host sweep (decision 062): what a server killed with SIGKILL left goes once its data dir is deleted, or once
// its sandbox is dead too; a live server's sandboxes, and a killed server's running ones (adopted by its restart),
// stay. The killed server is a real driver process (test-support/spawn-driver.ts) killed with SIGKILL.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { SandboxInfo } from '../driver.js';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import { SandboxCgroup } from './cgroup.js';
import { run } from './exec.js';
import { sweepHost } from './host-sweep.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { slotName } from './net-pool.js';
import { setAllowedRanges, setRawEgress, slotNet, slotOfAddress } from './network.js';
import { claimedSlots, slotOwner } from './slots.js';
import { processStartTime, readRecord } from './state.js';
import { callSocket, makeMiniDaemonCodeDir } from './test-support/mini-daemon.js';

const T = { timeout: 90_000 };
const dirs: string[] = [];
let live: LinuxDriver;
let liveDir: string;

const tmp = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), p));
  dirs.push(d);
  return d;
};

before(async () => {
  liveDir = tmp('berth-sweep-live-');
  live = await createLinuxDriver({
    dataDir: liveDir,
    codeDir: makeMiniDaemonCodeDir(liveDir),
    netPoolSize: 1,
  });
});

after(async () => {
  for (const s of await live.list()) await live.remove(s.id);
  await live.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A driver in a process of its own with one sandbox, killed with SIGKILL once the sandbox runs. */
async function killedServer(dataDir: string, id: string): Promise<SandboxInfo> {
  const script = fileURLToPath(new URL('./test-support/spawn-driver.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, BT_DATA_DIR: dataDir, BT_CODE_DIR: makeMiniDaemonCodeDir(dataDir), BT_ID: id },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const exited = new Promise((r) => child.once('exit', r));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', () => out.includes('\n') && resolve());
    child.once('exit', () => reject(new Error(`the driver process exited first: ${out}`)));
  });
  child.kill('SIGKILL');
  await exited;
  return JSON.parse(out.split('\n')[0]) as SandboxInfo;
}

const slotOf = (info: SandboxInfo) => slotOfAddress(info.address)!;
/** Running, not a zombie waiting for a parent that is gone. */
const alive = (pid: number) => processStartTime(pid) !== undefined;
const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer().listen(0, () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
const ruleset = () => run('nft', ['list', 'table', 'inet', 'berth_egress']);
const privateSet = () => run('nft', ['list', 'set', 'inet', 'berth_private', 'allowed']);

test(
  'what a killed server left goes once its data dir is deleted; a live server keeps its sandbox',
  T,
  async () => {
    const mine = await live.ensure('keep', smallSandboxSpec());
    const deadDir = tmp('berth-sweep-gone-');
    // Ports of its own (a server takes the documented ones when nothing listens on them: the live one may have).
    const port = await freePort();
    const ports = { explicit: port, tls: await freePort(), http: await freePort(), dns: await freePort() };
    writeFileSync(join(deadDir, 'egress-ports.json'), JSON.stringify(ports));
    const info = await killedServer(deadDir, 'left');
    const slot = slotOf(info);
    const net = slotNet(slot, slotName(slot));
    // What its egress policy and private ranges would have left keyed by its address.
    await run(
      'nft',
      ['-f', '-'],
      `add element inet berth_egress policed { ${info.address} }\nadd element inet berth_egress owners { ${info.address} : jump server_${port} }\n`,
    );
    await setRawEgress(info.address, { cidrs: ['198.51.100.0/24'], snat: '127.0.0.1' });
    await setAllowedRanges(info.address, ['192.168.77.0/24']);
    const pooled = claimedSlots().filter((c) => c.owner.startsWith(`${deadDir}/pool/`));
    assert.ok(pooled.length > 0, 'the killed driver had pooled networks');
    rmSync(deadDir, { recursive: true, force: true });
    assert.ok(alive(info.pid), 'its sandbox outlived it');

    const report = await sweepHost(live.cgroupHost);

    assert.equal(alive(info.pid), false, 'its sandbox process is killed');
    const owner = slotOwner(slot);
    assert.notEqual(owner, join(deadDir, 'sandboxes', 'left'), 'its claim is gone');
    for (const p of pooled) assert.notEqual(slotOwner(p.slot), p.owner, 'its pooled networks are gone');
    // Freed, the slot may be another server's at once (other test files run beside this one): its names then are.
    if (owner === undefined) {
      assert.equal(existsSync(net.netnsPath), false, 'its namespace is gone');
      assert.equal(existsSync(`/sys/class/net/${net.hostIf}`), false, 'its veth is gone');
      assert.equal(
        new SandboxCgroup(live.cgroupHost, slotName(slot)).dirs().some(existsSync),
        false,
        'its cgroups',
      );
      const rules = await ruleset();
      assert.equal(rules.includes(`${info.address} `), false, 'no berth_egress element keyed by its address');
      assert.equal((await privateSet()).includes(`${info.address} `), false, 'no berth_private element');
    }
    assert.equal((await ruleset()).includes(`chain server_${port} `), false, 'its chain is gone');
    // What this pass counts depends on what another server's sweep (a test file run beside this one) did first: the
    // state above is the check; the report must only say nothing failed.
    assert.deepEqual(report.failures, [], JSON.stringify(report));

    const still = await live.inspect('keep');
    assert.equal(still?.state, 'running', "the live server's sandbox is untouched");
    assert.equal(still?.pid, mine.pid);
    assert.equal((await callSocket(mine.socketPath, 'GET', '/health')).status, 200);
    assert.equal(slotOwner(slotOf(mine)), join(liveDir, 'sandboxes', 'keep'));
    const livePort = JSON.parse(readFileSync(join(liveDir, 'egress-ports.json'), 'utf8')).explicit;
    assert.ok((await ruleset()).includes(`chain server_${livePort} `), "the live server's chain");
  },
);

test(
  'a killed server whose data dir remains keeps its running sandbox for its restart; a dead one goes',
  T,
  async () => {
    const dir = tmp('berth-sweep-restart-');
    const info = await killedServer(dir, 'kept');
    const slot = slotOf(info);

    const first = await sweepHost(live.cgroupHost);
    assert.ok(alive(info.pid), 'the sandbox still runs');
    assert.equal(slotOwner(slot), join(dir, 'sandboxes', 'kept'), 'its claim is kept');
    assert.ok(first.kept >= 1);

    const codeDir = makeMiniDaemonCodeDir(dir);
    const restarted = await createLinuxDriver({ dataDir: dir, codeDir, netPoolSize: 0 });
    try {
      const found = await restarted.inspect('kept');
      assert.equal(found?.state, 'running', 'adopted by the restarted server');
      assert.equal(found?.pid, info.pid);
      assert.equal((await callSocket(found!.socketPath, 'GET', '/health')).status, 200);
    } finally {
      await restarted.close();
    }

    // Its server gone again and its sandbox dead now: nothing would adopt it, a restart would only replace it.
    const netns = slotNet(slot, slotName(slot)).netnsPath;
    const before = statSync(netns).ino;
    await new SandboxCgroup(live.cgroupHost, slotName(slot)).kill();
    await sweepHost(live.cgroupHost);
    // The freed slot may be another server's at once (other test files run beside this one).
    assert.notEqual(slotOwner(slot), join(dir, 'sandboxes', 'kept'), "the dead sandbox's claim is gone");
    assert.notEqual(statSync(netns, { throwIfNoEntry: false })?.ino, before, 'and its namespace');
    assert.ok(readRecord(join(dir, 'sandboxes', 'kept')), 'its record stays for its server');
    const again = await createLinuxDriver({ dataDir: dir, codeDir, netPoolSize: 0 });
    try {
      const dead = await again.inspect('kept');
      assert.equal(dead?.state, 'dead', 'reported dead by the restarted server');
      // How it ended (what tells an out-of-memory end from another) outlives its cgroup, in its record.
      assert.equal(dead?.ended?.oomKills, 0);
      assert.equal(dead?.ended?.memoryLimitBytes, 128 * 1024 * 1024);
      const fresh = await again.ensure('kept', smallSandboxSpec());
      assert.equal(fresh.state, 'running', 'and replaced');
      assert.equal((await callSocket(fresh.socketPath, 'GET', '/health')).status, 200);
      await again.remove('kept');
    } finally {
      await again.close();
    }
  },
);
