// Real sandboxes on this machine (needs root): isolation, limits, freezer, survival, cleanup.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { SandboxInfo } from '../driver.js';
import { sleep } from './exec.js';
import { createLinuxDriver, DEFAULT_UID_BASE, type LinuxDriver } from './linux-driver.js';
import { slotOwner } from './slots.js';
import { callSocket, makeMiniDaemonCodeDir, sandboxExec } from './test-support/mini-daemon.js';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';

const T = { timeout: 90_000 };
let dataDir: string;
let codeDir: string;
let driver: LinuxDriver;

const spec = smallSandboxSpec;

/** Polls until `check` returns a value, failing after a bound so no test can hang. */
async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 20_000,
) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const sh = async (info: SandboxInfo, cmd: string) => (await sandboxExec(info.socketPath, cmd)).stdout.trim();

/** What a TCP connect from inside the sandbox gets: CONNECTED, an errno code, or TIMEOUT (dropped). */
const probe = (info: SandboxInfo, host: string, port: number) =>
  sh(
    info,
    `node -e 'const s=require("net").connect(${port},"${host}");setTimeout(()=>{console.log("TIMEOUT");process.exit(0)},1500);` +
      `s.on("connect",()=>{console.log("CONNECTED");process.exit(0)});s.on("error",(e)=>{console.log(e.code);process.exit(0)})'`,
  );

const hostConnects = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, host);
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1500, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => resolve(false));
  });

const listen = (host: string) =>
  new Promise<Server>((resolve) => {
    const srv = createServer((_q, r) => r.end('host'));
    srv.listen(0, host, () => resolve(srv));
  });
const portOf = (srv: Server) => (srv.address() as { port: number }).port;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-rt-'));
  codeDir = makeMiniDaemonCodeDir(dataDir);
  driver = await createLinuxDriver({ dataDir, codeDir });
});

after(async () => {
  for (const s of await driver.list()) await driver.remove(s.id);
  await driver.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test(
  'a sandbox answers on its unix socket, is root inside and an unprivileged uid on the host',
  T,
  async (t) => {
    const started = performance.now();
    const info = await driver.ensure('basic', spec({ envs: { GREETING: 'hello' } }));
    t.diagnostic(`create (spawn to socket answering): ${(performance.now() - started).toFixed(1)} ms`);
    try {
      const health = await callSocket(info.socketPath, 'GET', '/health');
      assert.equal(health.status, 200);
      assert.equal(await sh(info, 'id -u'), '0');
      assert.equal(await sh(info, 'echo $GREETING $HOME'), 'hello /home/user');
      const pids = driver.cgroup('basic')!.pids();
      assert.ok(pids.length >= 3, 'bwrap, its init and the daemon');
      for (const pid of pids) {
        let status: string;
        try {
          status = readFileSync(`/proc/${pid}/status`, 'utf8');
        } catch {
          continue; // exited since the listing (a finished exec)
        }
        const uid = Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
        assert.equal(uid, info.hostUid);
        assert.ok(uid >= DEFAULT_UID_BASE);
      }
      assert.equal(await sh(info, 'grep CapEff /proc/self/status'), 'CapEff:\t0000000000000000');
      const again = await driver.ensure('basic', spec({ envs: { GREETING: 'hello' } }));
      assert.equal(again.pid, info.pid, 'same spec: the same sandbox');
      const changed = await driver.ensure('basic', spec({ envs: { GREETING: 'bye' } }));
      assert.notEqual(changed.pid, info.pid, 'another spec: a new sandbox');
      assert.equal(await sh(changed, 'echo $GREETING'), 'bye');
    } finally {
      await driver.remove('basic');
    }
  },
);

test(
  'host secrets and the data dir are absent inside; the root is writable in the sandbox only',
  T,
  async () => {
    const info = await driver.ensure('secrets', spec());
    try {
      assert.equal(await sh(info, 'test -e /etc/shadow && echo present || echo absent'), 'absent');
      assert.equal(await sh(info, 'test -e /etc/ssl/private && echo present || echo absent'), 'absent');
      assert.equal(await sh(info, 'test -e /root/.ssh && echo present || echo absent'), 'absent');
      assert.equal(await sh(info, `test -e ${dataDir} && echo present || echo absent`), 'absent');
      assert.equal(await sh(info, 'grep -c "" /etc/passwd'), '3', 'a generated passwd, not the host one');
      // The root is the host userland with the sandbox's own layer on top (decision 051): writes anywhere land there.
      const mark = `berth-${process.pid}-${Date.now()}`;
      assert.equal(await sh(info, `echo x > /session-test.txt && echo wrote`), 'wrote');
      assert.equal(await sh(info, `touch /usr/bin/${mark} /etc/${mark} && echo wrote`), 'wrote');
      assert.equal(await sh(info, 'echo changed >> /etc/profile && echo wrote'), 'wrote');
      assert.equal(existsSync(`/usr/bin/${mark}`), false, "the host's /usr is untouched");
      assert.doesNotMatch(readFileSync('/etc/profile', 'utf8'), /changed/);
      const upper = join(driver.layerDir('secrets')!, 'ovl');
      assert.ok(existsSync(join(upper, 'usr', 'upper', 'bin', mark)), 'in the sandbox layer');
      assert.ok(existsSync(join(upper, 'root', 'upper', 'session-test.txt')));
      assert.equal(await sh(info, 'touch /workspace/ok && echo wrote'), 'wrote');
      // Berth's own files stay Berth's.
      assert.equal(
        await sh(info, 'echo x >> /etc/hosts 2>/dev/null && echo wrote || echo refused'),
        'refused',
      );
      assert.equal(await sh(info, 'touch /opt/berth/x 2>/dev/null && echo wrote || echo refused'), 'refused');
      // The host connects as root: a sandbox must not be able to point that connection elsewhere.
      await sh(info, 'ln -sf /run/berth/env.json /run/berth/api.sock');
      assert.ok(statSync(info.socketPath).isSocket(), 'the host-side socket is out of the sandbox reach');
      assert.equal((await callSocket(info.socketPath, 'GET', '/health')).status, 200);
    } finally {
      await driver.remove('secrets');
    }
  },
);

test(
  'a sandbox reaches neither the host loopback, nor the host end of its link, nor another sandbox',
  T,
  async () => {
    const a = await driver.ensure('net-a', spec());
    const b = await driver.ensure('net-b', spec());
    const loop = await listen('127.0.0.1');
    const rec = JSON.parse(readFileSync(join(dataDir, 'sandboxes', 'net-a', 'state.json'), 'utf8'));
    // Bound to the host end of A's veth: a private address of this machine, reachable only over that link.
    const link = await listen(rec.hostAddress);
    try {
      assert.ok(await hostConnects('127.0.0.1', portOf(loop)), 'control: the loopback server is up');
      assert.ok(await hostConnects(rec.hostAddress, portOf(link)), 'control: the link server is up');
      assert.equal(
        await probe(a, '127.0.0.1', portOf(loop)),
        'ECONNREFUSED',
        "127.0.0.1 is the sandbox's own lo",
      );
      assert.equal(await probe(a, rec.hostAddress, portOf(link)), 'TIMEOUT', 'the host drops it');
      await sandboxExec(
        b.socketPath,
        `node -e 'require("net").createServer((s)=>s.end("b")).listen(7777,"0.0.0.0")' berth-marker-b`,
        true,
      );
      await waitFor('B listening', () => hostConnects(b.address, 7777));
      assert.equal(await probe(a, b.address, 7777), 'TIMEOUT', 'sandbox to sandbox is dropped');
      const seen = await sh(
        a,
        'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " " | grep -c "berth-marker-[b]" || true',
      );
      assert.equal(seen, '0', "B's processes are invisible from A");
      const count = Number(await sh(a, 'ls -d /proc/[0-9]* | wc -l'));
      assert.ok(count < 10, `A sees only its own few processes (${count})`);
    } finally {
      loop.close();
      link.close();
      await driver.remove('net-a');
      await driver.remove('net-b');
    }
  },
);

test('a fork bomb stops at pids.max and the host stays fine', T, async () => {
  const info = await driver.ensure('forkbomb', spec({ pidsMax: 64, cpuShares: 16 }));
  try {
    const cg = driver.cgroup('forkbomb')!;
    await sandboxExec(info.socketPath, 'b() { b | b & }; b', true);
    await waitFor('the pids limit to refuse forks', () => cg.pidsLimitHits() > 0);
    assert.ok(cg.stats().pids <= 64);
    assert.equal(execFileSync('/bin/echo', ['host ok']).toString().trim(), 'host ok');
  } finally {
    await driver.remove('forkbomb');
  }
});

test('a memory bomb is OOM-killed inside its sandbox only', T, async () => {
  const info = await driver.ensure('membomb', spec({ memoryMb: 128 }));
  try {
    const r = await sandboxExec(
      info.socketPath,
      `exec node -e 'const a=[];for(;;)a.push(Buffer.alloc(1<<20,1))'`,
    );
    assert.equal(r.signal, 'SIGKILL');
    const stats = (await driver.stats('membomb'))!;
    assert.ok(stats.oomKills >= 1);
    assert.equal(stats.memoryLimitBytes, 128 * 1024 * 1024);
    // Filling 128 MB took CPU time, accounted to the sandbox's own group (what /metrics reports).
    assert.ok((stats.cpuSeconds ?? 0) > 0, `cpuSeconds ${stats.cpuSeconds}`);
    assert.equal((await callSocket(info.socketPath, 'GET', '/health')).status, 200, 'the daemon survived');
  } finally {
    await driver.remove('membomb');
  }
});

test('filling the writable layer stops at the disk cap', T, async () => {
  const info = await driver.ensure('disk', spec({ diskMb: 16 }));
  try {
    const r = await sandboxExec(info.socketPath, 'dd if=/dev/zero of=/workspace/big bs=1M count=64');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /No space left on device/);
    const size = Number(await sh(info, 'stat -c %s /workspace/big'));
    assert.ok(size <= 16 * 1024 * 1024, `file stopped at the cap (${size})`);
    const tmp = await sandboxExec(info.socketPath, 'dd if=/dev/zero of=/tmp/more bs=1M count=1');
    assert.notEqual(tmp.code, 0, '/tmp shares the same cap');
    const usr = await sandboxExec(info.socketPath, 'dd if=/dev/zero of=/usr/lib/more bs=1M count=1');
    assert.notEqual(usr.code, 0, 'so does a write into the image (/usr)');
    await sh(info, 'rm /workspace/big');
    const copyUp = await sandboxExec(info.socketPath, 'echo x >> /usr/bin/node');
    assert.match(copyUp.stderr, /No space left on device/, 'a copy-up of a large image file meets the cap');
  } finally {
    await driver.remove('disk');
  }
});

test(
  'freeze stops a counter, thaw resumes it; 100 cycles keep it monotonic and files identical; an aborted freeze leaves it running',
  T,
  async (t) => {
    const info = await driver.ensure('freezer', spec());
    try {
      const layer = driver.layerDir('freezer')!;
      const countFile = join(layer, 'ovl', 'root', 'upper', 'workspace', 'count');
      const blobFile = join(layer, 'ovl', 'root', 'upper', 'workspace', 'blob');
      await sh(info, 'head -c 1048576 /dev/urandom > /workspace/blob');
      const hash = () => createHash('sha256').update(readFileSync(blobFile)).digest('hex');
      const before = hash();
      await sandboxExec(
        info.socketPath,
        `node -e 'const fs=require("fs");let i=0;setInterval(()=>{i++;fs.writeFileSync("/workspace/c.tmp",String(i));fs.renameSync("/workspace/c.tmp","/workspace/count")},1)'`,
        true,
      );
      const count = () => (existsSync(countFile) ? Number(readFileSync(countFile, 'utf8')) : 0);
      await waitFor('the counter to run', () => count() > 10);

      await driver.freeze('freezer');
      assert.equal((await driver.inspect('freezer'))!.state, 'frozen');
      const c1 = count();
      await sleep(100);
      assert.equal(count(), c1, 'a frozen counter does not advance');
      const pending = callSocket(info.socketPath, 'GET', '/health'); // waits for the thaw, nothing lost
      await driver.thaw('freezer');
      assert.equal((await pending).status, 200);
      await waitFor('the counter to resume', () => count() > c1);

      let last = count();
      const thawMs: number[] = [];
      for (let i = 0; i < 100; i++) {
        await driver.freeze('freezer');
        const c = count();
        assert.ok(c >= last, `monotonic (${c} after ${last})`);
        assert.equal(count(), c);
        last = c;
        const t0 = performance.now();
        await driver.thaw('freezer');
        thawMs.push(performance.now() - t0);
      }
      await waitFor('the counter to pass the last frozen value', () => count() > last);
      assert.equal(hash(), before, 'files are byte-identical after 100 cycles');

      // A freeze called off (a request arrived) leaves the sandbox running, however far it got.
      for (const when of ['before', 'at once', 'after 1 ms'] as const) {
        const ac = new AbortController();
        if (when === 'before') ac.abort();
        const freezing = driver.freeze('freezer', ac.signal);
        if (when === 'at once') ac.abort();
        if (when === 'after 1 ms') setTimeout(() => ac.abort(), 1);
        await freezing;
        if (when === 'after 1 ms' && (await driver.inspect('freezer'))!.state === 'frozen') {
          // The freeze finished before the abort: the caller (the gateway) thaws, as it would.
          await driver.thaw('freezer');
        }
        assert.equal((await driver.inspect('freezer'))!.state, 'running', `aborted ${when}`);
        const c = count();
        await waitFor(`the counter to run after a freeze aborted ${when}`, () => count() > c);
      }
      thawMs.sort((x, y) => x - y);
      t.diagnostic(`thaw p50 ${thawMs[50].toFixed(3)} ms, p99 ${thawMs[98].toFixed(3)} ms`);
      await driver.freeze('freezer');
      await driver.remove('freezer'); // a frozen sandbox is removed like any other
      assert.equal(await driver.inspect('freezer'), undefined);
      assert.throws(() => process.kill(info.pid, 0), 'the frozen process is gone');
    } finally {
      await driver.remove('freezer');
    }
  },
);

test('seccomp denies keyctl and io_uring; nested user namespaces are refused', T, async () => {
  const info = await driver.ensure('seccomp', spec());
  try {
    assert.equal(await sh(info, 'grep "^Seccomp:" /proc/self/status'), 'Seccomp:\t2');
    const py = (nr: number) =>
      sh(
        info,
        `python3 -c 'import ctypes;l=ctypes.CDLL(None,use_errno=True);r=l.syscall(${nr},0,0,0,0,0);print(r,ctypes.get_errno())'`,
      );
    assert.equal(await py(250), '-1 1', 'keyctl: EPERM');
    assert.equal(await py(425), '-1 38', 'io_uring_setup: ENOSYS');
    assert.equal(await sh(info, 'unshare -U true 2>/dev/null && echo made || echo refused'), 'refused');
  } finally {
    await driver.remove('seccomp');
  }
});

test('a sandbox outlives the process that launched it and a new driver re-adopts it', T, async () => {
  const script = fileURLToPath(new URL('./test-support/spawn-driver.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, BT_DATA_DIR: dataDir, BT_CODE_DIR: codeDir, BT_ID: 'orphan' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const line = await waitFor(
      'the child to start a sandbox',
      () => out.includes('\n') && out.split('\n')[0],
      60_000,
    );
    const info = JSON.parse(line) as SandboxInfo;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    const fresh = await createLinuxDriver({ dataDir, codeDir });
    const found = (await fresh.list()).find((s) => s.id === 'orphan');
    assert.ok(found, 'the state file is found');
    assert.equal(found.state, 'running');
    assert.equal(found.pid, info.pid);
    assert.equal((await callSocket(found.socketPath, 'GET', '/health')).status, 200);
    await fresh.close();
  } finally {
    child.kill('SIGKILL');
    await driver.remove('orphan');
  }
});

test('a dead sandbox is reported and recreated; remove leaves nothing behind', T, async () => {
  const info = await driver.ensure('lifecycle', spec());
  const first = driver.cgroup('lifecycle')!;
  await first.kill();
  assert.equal((await driver.list()).find((s) => s.id === 'lifecycle')?.state, 'dead');
  const again = await driver.ensure('lifecycle', spec());
  assert.equal(again.state, 'running');
  assert.notEqual(again.pid, info.pid);
  const cg = driver.cgroup('lifecycle')!;
  const slot = Number(cg.name.slice(2));
  const layer = driver.layerDir('lifecycle')!;
  const owned = [...cg.dirs(), `/run/netns/berth-${cg.name}`, `/sys/class/net/bh${slot}`, layer];
  await driver.remove('lifecycle');
  await driver.remove('lifecycle'); // idempotent
  assert.equal(await driver.inspect('lifecycle'), undefined);
  assert.throws(() => process.kill(again.pid, 0), 'the process is gone');
  // Other test files share the host's slots: a freed slot may be claimed again at once, and then
  // its kernel objects exist again under the same names, but they are no longer this sandbox's.
  const reused = slotOwner(slot) !== undefined;
  assert.notEqual(slotOwner(slot), join(dataDir, 'sandboxes', 'lifecycle'), 'slot released');
  if (!reused) {
    for (const p of owned) assert.equal(existsSync(p), false, `${p} removed`);
    assert.equal(
      readFileSync('/proc/self/mountinfo', 'utf8').includes(`${layer} `),
      false,
      'layer unmounted',
    );
  }
  assert.equal(existsSync(again.socketPath), false);
  assert.equal(existsSync(join(dataDir, 'sandboxes', 'lifecycle')), false);
});
