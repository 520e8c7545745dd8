// Deep standby on real sandboxes (needs root): a frozen sandbox's memory goes to swap and comes back byte-exact on
// wake; the setting 0 leaves it resident; a host without swap is reported, never pretended.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import type { DeepStandbyEvent, SandboxInfo } from '../driver.js';
import { detectCgroups } from './cgroup.js';
import { activeSwaps, prepareSwap } from './deep-standby.js';
import { sleep } from './exec.js';
import { daemonPid } from './page-out.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { callSocket, makeMiniDaemonCodeDir, sandboxExec } from './test-support/mini-daemon.js';

const T = { timeout: 60_000 };
/** One swap file for these tests, outside the throw-away data dirs (an active swap file must not be deleted). */
const SWAP_FILE = '/var/tmp/berth-test-swap/berth.swap';
let dataDir: string;
let codeDir: string;
let deep: LinuxDriver;
let deepAll: LinuxDriver;
let resident: LinuxDriver;
let swapWasOn = false;
const events: DeepStandbyEvent[] = [];

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-deep-'));
  codeDir = makeMiniDaemonCodeDir(dataDir);
  swapWasOn = activeSwaps().has(SWAP_FILE);
  const common = { codeDir, warmPoolSize: 0, netPoolSize: 0 };
  deep = await createLinuxDriver({
    ...common,
    dataDir: join(dataDir, 'deep'),
    deepStandbyAfterS: 1,
    swap: { file: SWAP_FILE, sizeMb: 256 },
    onDeepStandby: (e) => events.push(e),
    deepStandbyKeepDaemon: true,
  });
  deepAll = await createLinuxDriver({
    ...common,
    dataDir: join(dataDir, 'deep-all'),
    deepStandbyAfterS: 1,
    swap: { file: SWAP_FILE, sizeMb: 256 },
  });
  resident = await createLinuxDriver({ ...common, dataDir: join(dataDir, 'resident'), deepStandbyAfterS: 0 });
});

after(async () => {
  for (const d of [deep, deepAll, resident]) {
    for (const i of await d.list()) await d.remove(i.id);
    await d.close();
  }
  // Switched off only by the run that switched it on (the pages of the sandboxes above are gone with them).
  if (!swapWasOn && activeSwaps().has(SWAP_FILE)) {
    execFileSync('swapoff', [SWAP_FILE]);
    rmSync(SWAP_FILE, { force: true });
  }
  rmSync(dataDir, { recursive: true, force: true });
});

async function waitFor<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const sh = async (info: SandboxInfo, cmd: string) => (await sandboxExec(info.socketPath, cmd)).stdout.trim();

/**
 * Starts a process holding 20 MB of known bytes and a counter it writes every millisecond; on SIGUSR1 it writes the
 * sha256 of its buffer to /workspace/check. Its first sha256 is in /workspace/expect.
 */
async function startHolder(driver: LinuxDriver, info: SandboxInfo) {
  const script =
    'const fs=require("fs"),c=require("crypto");const b=Buffer.alloc(20<<20);' +
    'for(let i=0;i<b.length;i++)b[i]=(i*131+7)&255;' +
    'const h=()=>c.createHash("sha256").update(b).digest("hex");' +
    'fs.writeFileSync("/workspace/pid",String(process.pid));fs.writeFileSync("/workspace/expect",h());' +
    'process.on("SIGUSR1",()=>fs.writeFileSync("/workspace/check",h()));' +
    'let n=0;setInterval(()=>{n++;fs.writeFileSync("/workspace/c.tmp",String(n));fs.renameSync("/workspace/c.tmp","/workspace/count")},1)';
  await sandboxExec(info.socketPath, `node -e '${script}'`, true);
  const upper = join(driver.layerDir(info.id)!, 'ovl', 'root', 'upper', 'workspace');
  const file = (n: string) => (existsSync(join(upper, n)) ? readFileSync(join(upper, n), 'utf8') : '');
  await waitFor(
    'the holder to fill its buffer',
    () => file('expect').length === 64 && Number(file('count')) > 5,
  );
  return { file, count: () => Number(file('count')) };
}

const vmSwap = (pid: number) =>
  Number(/^VmSwap:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024;

/** Freezes a sandbox running the holder, waits for deep standby, wakes it with a request, checks its bytes. */
async function deepAndBack(driver: LinuxDriver, id: string, checkDeep: (daemon: number) => void) {
  const info = await driver.ensure(id, smallSandboxSpec());
  const holder = await startHolder(driver, info);
  const cg = driver.cgroup(id)!;
  const held = cg.stats().memoryBytes;
  assert.ok(held > 20 << 20, `the holder's 20 MB are resident (${held} bytes)`);

  await driver.freeze(id);
  const frozenAt = holder.count();
  await waitFor('deep standby', async () => (await driver.inspect(id))?.deepStandby);
  const after = cg.stats().memoryBytes;
  assert.ok(held - after > 20 << 20, `more than 20 MB left memory (${held} → ${after} bytes)`);
  assert.equal(holder.count(), frozenAt, 'still frozen: the counter did not move');
  const daemon = daemonPid(cg.pids());
  assert.ok(daemon, 'the API daemon is found among the sandbox processes');
  checkDeep(daemon);

  // A request waits for the wake, as for any standby, and is answered.
  const pending = callSocket(info.socketPath, 'GET', '/health');
  await driver.thaw(id);
  assert.equal((await pending).status, 200);
  assert.equal((await driver.inspect(id))?.deepStandby, undefined, 'awake, no longer deep');
  await waitFor('the counter to go on', () => holder.count() > frozenAt);
  await sh(info, 'kill -USR1 $(cat /workspace/pid)');
  await waitFor('the holder to check its buffer', () => holder.file('check').length === 64);
  assert.equal(holder.file('check'), holder.file('expect'), 'the 20 MB came back byte-exact');
}

test(
  'deep standby pushes a frozen sandbox to swap, API daemon included; a request wakes it with its memory byte-exact',
  T,
  async () => {
    assert.equal(deepAll.capabilities.deepStandby, true, deepAll.capabilities.deepStandbyReason);
    await deepAndBack(deepAll, 'deep-all', (daemon) => {
      assert.ok(vmSwap(daemon) > 0, 'the API daemon went to swap with the rest');
    });
  },
);

test(
  'BERTH_DEEP_STANDBY_DAEMON=resident pushes out the user processes and keeps the API daemon; the wake is byte-exact',
  T,
  async () => {
    assert.equal(deep.capabilities.deepStandby, true, deep.capabilities.deepStandbyReason);
    await deepAndBack(deep, 'deep', (daemon) => {
      // The host's own reclaim may swap a few pages of any process (other tests use the swap file too); pushed out
      // with the sandbox, the daemon's tens of MB would be there.
      assert.ok(
        vmSwap(daemon) < 2 * 1024 * 1024,
        'the API daemon stayed resident: the wake does not wait for it',
      );
    });
    assert.equal(events.length, 1);
    assert.equal(events[0].id, 'deep');
    assert.ok(events[0].beforeBytes - events[0].afterBytes > 20 << 20, 'the event says what was pushed out');
  },
);

test('a wake before the delay keeps the sandbox out of deep standby', T, async () => {
  const info = await deep.ensure('short', smallSandboxSpec());
  await sh(info, 'true');
  const before = events.length;
  await deep.freeze('short');
  await deep.thaw('short');
  await sleep(1_500); // past the 1 s delay: the timer the freeze set was cancelled by the thaw
  assert.equal(events.length, before);
  assert.equal((await deep.inspect('short'))?.state, 'running');
});

test(
  'BERTH_DEEP_STANDBY_AFTER=0 leaves a frozen sandbox resident and says deep standby is off',
  T,
  async () => {
    assert.equal(resident.capabilities.deepStandby, false);
    assert.match(resident.capabilities.deepStandbyReason ?? '', /off/);
    const info = await resident.ensure('kept', smallSandboxSpec());
    const holder = await startHolder(resident, info);
    const cg = resident.cgroup('kept')!;
    await resident.freeze('kept');
    const held = cg.stats().memoryBytes;
    await sleep(1_500);
    assert.equal(resident.deepStandby.enabled, false);
    assert.equal((await resident.inspect('kept'))?.deepStandby, undefined);
    assert.ok(cg.stats().memoryBytes >= held - (1 << 20), 'its memory stayed resident');
    await resident.thaw('kept');
    await waitFor('the counter to go on', () => holder.count() > 0);
  },
);

test('a host without swap, or one where Berth cannot switch its file on, is reported and not pretended', async () => {
  const host = detectCgroups();
  const none = () => new Map<string, number>();
  const off = await prepareSwap(host, { file: join(dataDir, 'unused.swap'), sizeMb: 0 }, none);
  assert.equal(off.available, false);
  assert.match(off.reason ?? '', /no swap/);
  // Its directory cannot be made: a regular file is in the way.
  const blocked = join(dataDir, 'not-a-dir', 'berth.swap');
  writeFileSync(join(dataDir, 'not-a-dir'), '');
  const failed = await prepareSwap(host, { file: blocked, sizeMb: 16 }, none);
  assert.equal(failed.available, false);
  assert.ok(failed.reason?.includes(`could not switch on ${blocked}`), failed.reason);
  const unified = await prepareSwap({ ...host, layout: 'unified' }, { file: SWAP_FILE, sizeMb: 16 }, none);
  assert.equal(unified.available, false);
  assert.match(unified.reason ?? '', /cgroup2/);
  const hostSwap = await prepareSwap(
    host,
    { file: join(dataDir, 'unused.swap'), sizeMb: 0 },
    () => new Map([['/dev/zram0', 1 << 30]]),
  );
  assert.deepEqual(
    hostSwap,
    { available: true, totalBytes: 1 << 30 },
    "the host's own swap is used as it is",
  );
});
