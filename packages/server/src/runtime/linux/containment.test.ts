// Hostile code inside a real sandbox (the real API daemon, needs `npm run build` and root) attacks what it shares a
// uid with: the daemon and pid 1, their descriptors and sockets, and the disk behind /run/berth. Each attack is
// real code (python3 with ctypes, present in the host userland every sandbox sees) and must fail; the same
// calls on the user's own processes must still work (debuggers stay usable).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { SandboxInfo, SandboxSpec } from '../driver.js';
import { sleep } from './exec.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { callSocket } from './test-support/mini-daemon.js';

const T = { timeout: 90_000 };
let dataDir: string;
let driver: LinuxDriver;

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({
  memoryMb: 256,
  pidsMax: 64,
  cpuShares: 128,
  diskMb: 16,
  envs: { SECRET_TOKEN: 'must-stay-inside-the-daemon' },
  image: '',
  volumes: [],
  ...over,
});

interface Done {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs `command` through the real daemon's POST /process and waits for it. */
async function exec(info: SandboxInfo, command: string): Promise<Done> {
  const r = await callSocket(info.socketPath, 'POST', '/process', { command, waitForCompletion: true });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as Done;
}

/** Each attempt on pid 1 and pid 2 (the daemon), and the same calls on a child of the attacker's own. */
const ATTACK = `
import ctypes, json, os, platform, signal, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {'x86_64': dict(ptrace=101, process_vm_readv=310, pidfd_open=434, pidfd_getfd=438, kill=62),
      'aarch64': dict(ptrace=117, process_vm_readv=270, pidfd_open=434, pidfd_getfd=438, kill=129)}[platform.machine()]
def sc(name, *args):
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    return 'ok' if r >= 0 else os.strerror(ctypes.get_errno())
class iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
buf = ctypes.create_string_buffer(64)
def vm_read(pid, addr):
    local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 64), iovec(addr, 64)
    r = libc.syscall(ctypes.c_long(NR['process_vm_readv']), ctypes.c_long(pid), ctypes.byref(local),
                     ctypes.c_long(1), ctypes.byref(remote), ctypes.c_long(1), ctypes.c_long(0))
    return 'ok' if r >= 0 else os.strerror(ctypes.get_errno())
def text_start(pid):
    try: return int(open('/proc/%d/maps' % pid).readline().split('-')[0], 16)
    except Exception: return 0x400000
def tryio(f):
    try: f(); return 'ok'
    except OSError as e: return os.strerror(e.errno)
def getfd(pid):
    pfd = libc.syscall(ctypes.c_long(NR['pidfd_open']), ctypes.c_long(pid), ctypes.c_long(0))
    if pfd < 0: return 'pidfd_open: ' + os.strerror(ctypes.get_errno())
    return sc('pidfd_getfd', pfd, 1, 0)
def attempts(pid):
    out = {}
    out['ptrace_attach'] = sc('ptrace', 16, pid, 0, 0)
    if out['ptrace_attach'] == 'ok':
        os.waitpid(pid, 0x40000000); sc('ptrace', 17, pid, 0, 0)
    out['ptrace_seize'] = sc('ptrace', 0x4206, pid, 0, 0)
    if out['ptrace_seize'] == 'ok': sc('ptrace', 17, pid, 0, 0)
    out['process_vm_readv'] = vm_read(pid, text_start(pid))
    out['proc_mem'] = tryio(lambda: open('/proc/%d/mem' % pid, 'rb').close())
    out['proc_fd'] = tryio(lambda: os.listdir('/proc/%d/fd' % pid))
    out['proc_environ'] = tryio(lambda: open('/proc/%d/environ' % pid, 'rb').read())
    out['pidfd_getfd'] = getfd(pid)
    out['signal'] = sc('kill', pid, 0)
    return out
res = {'pid1': attempts(1), 'daemon': attempts(2), 'everyone': {'signal': sc('kill', -1, 0)}}
child = os.fork()
if child == 0:
    time.sleep(30); os._exit(0)
own = attempts(child)
res['own'] = own
os.kill(child, signal.SIGKILL); os.waitpid(child, 0)
files = []
for fd in os.listdir('/proc/self/fd'):
    try: t = os.readlink('/proc/self/fd/' + fd)
    except OSError: continue
    if t.startswith('/') and t not in ('/dev/null',) and not t.startswith('/dev/pts/') and not t.startswith('/proc/'):
        files.append(t)
res['open_files'] = files
print(json.dumps(res))
`;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-contain-'));
  driver = await createLinuxDriver({ dataDir }); // the real daemon from dist
});

after(async () => {
  for (const s of await driver.list()) await driver.remove(s.id);
  await driver.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test(
  'user code cannot trace, read, signal or take descriptors from the daemon or pid 1, and may from its own processes',
  T,
  async () => {
    const info = await driver.ensure('attack', spec());
    try {
      const r = await exec(info, `python3 - <<'PY'\n${ATTACK}\nPY`);
      assert.equal(r.exitCode, 0, r.stderr);
      const res = JSON.parse(r.stdout);
      for (const target of ['pid1', 'daemon']) {
        for (const [what, outcome] of Object.entries(res[target]))
          assert.notEqual(outcome, 'ok', `${what} on ${target} must fail`);
      }
      assert.notEqual(res.everyone.signal, 'ok', 'kill(-1) must fail');
      // The same calls on a child of its own: strace, gdb and friends keep working.
      for (const what of [
        'ptrace_attach',
        'ptrace_seize',
        'process_vm_readv',
        'proc_mem',
        'proc_fd',
        'signal',
      ])
        assert.equal(res.own[what], 'ok', `${what} on an own process`);
      assert.deepEqual(res.open_files, [], 'no host file is open in user code');
      assert.equal(
        (await callSocket(info.socketPath, 'GET', '/health')).status,
        200,
        'the daemon is untouched',
      );
      const log = readFileSync(join(dataDir, 'sandboxes', 'attack', 'daemon.log'), 'utf8');
      assert.match(log, /"event":"listening"/, 'the daemon output still reaches its log');
    } finally {
      await driver.remove('attack');
    }
  },
);

test('pid 1 reaps orphans, so a detached grandchild leaves no zombie', T, async () => {
  const info = await driver.ensure('orphans', spec());
  try {
    await exec(info, "sh -c '(sleep 0.2 &) ; true'");
    await sleep(1000);
    const z = await exec(info, "cat /proc/[0-9]*/stat 2>/dev/null | grep -c ') Z ' || true");
    assert.equal(z.stdout.trim(), '0');
  } finally {
    await driver.remove('orphans');
  }
});

test('user code cannot answer API calls in place of the daemon by rebinding its socket', T, async () => {
  const info = await driver.ensure('imposter', spec());
  try {
    const r = await exec(
      info,
      `rm -f /run/berth/api.sock; nohup node -e 'require("http").createServer((q,s)=>s.end("{\\"imposter\\":true}")).listen("/run/berth/api.sock")' >/dev/null 2>&1 & sleep 0.5; test -S /run/berth/api.sock && echo rebound`,
    );
    assert.equal(r.stdout.trim(), 'rebound', r.stderr);
    const health = await callSocket(info.socketPath, 'GET', '/health');
    assert.equal(health.status, 200);
    assert.equal(health.body.imposter, undefined, 'the host still reaches the real daemon');
    assert.ok(health.body.status, 'a daemon health answer');
  } finally {
    await driver.remove('imposter');
  }
});

test('writes to /run/berth stop at the disk cap, shared with the rest of the writable layer', T, async () => {
  const info = await driver.ensure('rundisk', spec({ diskMb: 16 }));
  try {
    const r = await exec(info, 'dd if=/dev/zero of=/run/berth/fill bs=1M count=64');
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /No space left on device/);
    const size = Number((await exec(info, 'stat -c %s /run/berth/fill')).stdout.trim());
    assert.ok(size <= 16 * 1024 * 1024, `stopped at the cap (${size})`);
    const more = await exec(info, 'dd if=/dev/zero of=/workspace/more bs=1M count=1');
    assert.notEqual(more.exitCode, 0, '/workspace shares the same cap');
    await exec(info, 'rm -f /run/berth/fill');
    await sleep(10);
    assert.equal((await callSocket(info.socketPath, 'GET', '/health')).status, 200);
  } finally {
    await driver.remove('rundisk');
  }
});
