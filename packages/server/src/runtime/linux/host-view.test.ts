// What a sandbox sees of its host, read by code inside real sandboxes (the real API daemon; needs `npm run build`
// and root): its mount table names no host path, the /proc entries container runtimes mask are empty and read-only
// and the kernel-wide ones cannot be written, and it has no IPv6 at all. Both a sandbox taken from the warm pool
// and one started cold are checked: they are made by different paths.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import type { SandboxInfo } from '../driver.js';
import { defaultCodeDir, nodeModulesFor } from './host.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { callSocket } from './test-support/mini-daemon.js';

const T = { timeout: 120_000 };

/** Docker's and runc's masked /proc entries, the host's interrupts, its kernel command line and configuration. */
const MASKED = [
  'acpi',
  'asound',
  'cmdline',
  'config.gz',
  'interrupts',
  'kcore',
  'keys',
  'latency_stats',
  'sched_debug',
  'scsi',
  'timer_list',
  'timer_stats',
].filter((n) => existsSync(`/proc/${n}`));

async function sh(info: SandboxInfo, command: string) {
  const r = await callSocket(info.socketPath, 'POST', '/process', { command, waitForCompletion: true });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { exitCode: number; stdout: string; stderr: string };
}

/** IPv6 from inside: each attempt's outcome, `ok` where the kernel let it through. */
const IPV6_ATTEMPTS = `
import errno, json, socket
def attempt(f):
    try:
        f(); return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def tcp(addr):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.settimeout(2); s.connect((addr, 80))
def udp(addr):
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b'x', (addr, 9))
print(json.dumps({
  'tcp ::1': attempt(lambda: tcp('::1')),
  'tcp global': attempt(lambda: tcp('2001:4860:4860::8888')),
  'tcp link-local router': attempt(lambda: tcp('fe80::1%eth0')),
  'udp all-nodes multicast': attempt(lambda: udp('ff02::1%eth0')),
  'udp all-routers multicast': attempt(lambda: udp('ff02::2%eth0')),
  'bind ::1': attempt(lambda: socket.socket(socket.AF_INET6).bind(('::1', 0))),
}))
`;

describe('what a sandbox sees of its host', () => {
  let dataDir: string;
  let coldDir: string;
  let warmDriver: LinuxDriver;
  let coldDriver: LinuxDriver;
  let warm: SandboxInfo;
  let cold: SandboxInfo;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-hostview-'));
    coldDir = mkdtempSync(join(tmpdir(), 'berth-hostview-cold-'));
    warmDriver = await createLinuxDriver({ dataDir, warmPoolSize: 1 });
    coldDriver = await createLinuxDriver({ dataDir: coldDir, warmPoolSize: 0, netPoolSize: 0 });
    await warmDriver.poolsIdle();
    assert.equal(warmDriver.warmPool.readyCount, 1, 'a warm sandbox waits in the pool');
    warm = await warmDriver.ensure('view-warm', smallSandboxSpec());
    assert.equal(warmDriver.warmPool.readyCount, 0, 'the sandbox was the warm one');
    cold = await coldDriver.ensure('view-cold', smallSandboxSpec());
  });

  after(async () => {
    for (const d of [warmDriver, coldDriver]) {
      for (const s of (await d?.list()) ?? []) await d.remove(s.id);
      await d?.close();
    }
    for (const d of [dataDir, coldDir]) rmSync(d, { recursive: true, force: true });
  });

  for (const kind of ['warm', 'cold'] as const) {
    const info = () => (kind === 'warm' ? warm : cold);
    it(
      `${kind}: /proc/self/mountinfo names no host path (data dir, the server's code, its node_modules)`,
      T,
      async () => {
        const r = await sh(info(), 'cat /proc/self/mountinfo');
        assert.equal(r.exitCode, 0, r.stderr);
        const code = realpathSync(defaultCodeDir());
        const hostPaths = [
          realpathSync(kind === 'warm' ? dataDir : coldDir),
          code,
          ...nodeModulesFor(code).map((p) => realpathSync(p)),
        ];
        for (const p of hostPaths) assert.ok(!r.stdout.includes(p), `${p} appears in\n${r.stdout}`);
        // Each mount's root (field 4) is a path inside its own file system that says nothing of the host's layout.
        const roots = r.stdout
          .trim()
          .split('\n')
          .map((l) => l.split(' ')[3]);
        for (const root of roots)
          assert.match(
            root,
            /^\/(newroot|usr|(run\/)?berth\/(bin|empty|empty-file)|home|tmp|workspace|var|run|null|zero|full|random|urandom|tty|hosts|hostname|resolv\.conf)?$/,
          );
        // The root is an overlay of the image under the sandbox's layer, given as descriptors: it names no path.
        assert.match(
          r.stdout,
          /^\S+ \S+ \S+ \/ \/ rw,[^ ]* - overlay none rw,lowerdir\+=\/,lowerdir\+=\/,upperdir=\/ovl\/root\/upper,workdir=\/ovl\/root\/work[,a-z=]*$/m,
        );
        assert.match(r.stdout, / \/etc\/hosts ro,.* - overlay berth-view ro,lowerdir=\.:\/run\/berth\/empty/);
      },
    );

    it(
      `${kind}: the masked /proc entries are empty and read-only; the kernel's settings cannot be written`,
      T,
      async () => {
        const script = [
          ...MASKED.map(
            (n) =>
              `if [ -d /proc/${n} ]; then echo "${n} $(ls -A /proc/${n} | wc -l)"; else echo "${n} $(wc -c < /proc/${n})"; fi`,
          ),
          ...MASKED.map((n) => `(: > /proc/${n}) 2>/dev/null && echo "wrote ${n}"`),
          ...['sys/kernel/hostname', 'sys/vm/drop_caches', 'sys/net/ipv4/ip_forward', 'sysrq-trigger'].map(
            (p) => `(echo 1 > /proc/${p}) 2>/dev/null && echo "wrote ${p}"`,
          ),
          'true',
        ].join('\n');
        const r = await sh(info(), script);
        assert.equal(r.exitCode, 0, r.stderr);
        assert.deepEqual(
          r.stdout.trim().split('\n'),
          MASKED.map((n) => `${n} 0`),
        );
        assert.ok(MASKED.includes('cmdline') && MASKED.includes('keys'), 'this host has the entries tested');
      },
    );

    it(`${kind}: no IPv6 address, and no IPv6 socket reaches anything`, T, async () => {
      const r = await sh(
        info(),
        'cat /proc/net/if_inet6 | wc -l; for f in all default lo eth0; do cat /proc/sys/net/ipv6/conf/$f/disable_ipv6; done',
      );
      assert.deepEqual(r.stdout.trim().split('\n'), ['0', '1', '1', '1', '1'], r.stderr);
      const v6 = await sh(info(), `python3 - <<'PY'\n${IPV6_ATTEMPTS}\nPY`);
      assert.equal(v6.exitCode, 0, v6.stderr);
      for (const [what, outcome] of Object.entries(JSON.parse(v6.stdout)))
        assert.notEqual(outcome, 'ok', `${what} must fail`);
    });
  }

  it("a sandbox's views go with it", T, async () => {
    const dir = join('/run/berth/views', warmDriver.cgroup('view-warm')?.name ?? 'unknown');
    assert.ok(statSync(dir).isDirectory());
    await warmDriver.remove('view-warm');
    assert.equal(existsSync(dir), false);
  });
});
