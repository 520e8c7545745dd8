// A sandbox's memory runs out inside real sandboxes (the real API daemon; needs `npm run build` and root): the
// kernel must end the user's processes before the daemon, and when the daemon is ended (its writable layer is a
// tmpfs charged to its memory cgroup, so files fill memory as processes do), the runtime must say so.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import type { SandboxInfo } from '../driver.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { callSocket } from './test-support/mini-daemon.js';

const T = { timeout: 120_000 };
const MB = 1024 * 1024;
/** The tests' sandboxes: their disk (the layer's cap) as large as their memory, as a default spec has it. */
const MEMORY_MB = 256;
const spec = smallSandboxSpec({ memoryMb: MEMORY_MB, diskMb: MEMORY_MB });

async function sh(info: SandboxInfo, command: string, name?: string) {
  const r = await callSocket(info.socketPath, 'POST', '/process', {
    command,
    ...(name ? { name } : { waitForCompletion: true }),
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { exitCode: number; stdout: string; stderr: string; status: string };
}

/** PUT /filesystem/<path> as a multipart upload of `mb` MB of zeros, streamed: the daemon writes the file itself. */
function upload(info: SandboxInfo, path: string, mb: number): Promise<string> {
  const boundary = 'berth-oom-test';
  return new Promise((resolve) => {
    const req = request(
      {
        socketPath: info.socketPath,
        path: `/filesystem${path}`,
        method: 'PUT',
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(`answered ${res.statusCode}`));
      },
    );
    req.on('error', (e) => resolve(`failed: ${(e as NodeJS.ErrnoException).code ?? e.message}`));
    (async () => {
      const chunk = Buffer.alloc(MB);
      req.write(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n` +
          'Content-Type: application/octet-stream\r\n\r\n',
      );
      const writable = () =>
        new Promise<void>((r) => {
          const go = () => {
            req.off('drain', go).off('close', go);
            r();
          };
          req.on('drain', go).on('close', go);
        });
      for (let i = 0; i < mb && !req.destroyed; i++) if (!req.write(chunk)) await writable();
      req.end(`\r\n--${boundary}--\r\n`);
    })();
  });
}

describe('a sandbox out of memory', () => {
  let dataDir: string;
  let driver: LinuxDriver;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-oom-'));
    driver = await createLinuxDriver({ dataDir, warmPoolSize: 0, netPoolSize: 0 });
  });

  after(async () => {
    for (const s of (await driver?.list()) ?? []) await driver.remove(s.id);
    await driver?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("ends the user's processes, each smaller than the daemon, before the daemon", T, async () => {
    const info = await driver.ensure('oom-users', spec);
    // 12 processes of ~25 MB each (the daemon is ~45 MB resident) need more than the sandbox's memory: by size
    // alone the kernel would end the daemon first. Each holds its memory a moment, then exits.
    const r = await sh(
      info,
      [
        'pids=""',
        `for i in $(seq 12); do python3 -c "import time; a = bytearray(b'x' * (16 << 20)); time.sleep(3)" & pids="$pids $!"; done`,
        'k=0; for p in $pids; do wait $p; [ $? = 137 ] && k=$((k+1)); done; echo killed=$k',
      ].join('\n'),
    );
    const killed = Number(/killed=(\d+)/.exec(r.stdout)?.[1]);
    assert.ok(killed >= 1 && killed < 12, `some of the user's processes were killed: ${r.stdout}`);
    assert.ok((await driver.stats('oom-users'))!.oomKills >= killed, 'by the out-of-memory killer');
    // The daemon answered the command above, and goes on.
    assert.equal((await sh(info, 'echo ok')).stdout, 'ok\n');
    assert.equal((await driver.inspect('oom-users'))?.state, 'running');
  });

  it(
    'when the daemon itself fills the memory with a file it writes, the sandbox ends and says why',
    T,
    async () => {
      const info = await driver.ensure('oom-daemon', spec);
      const outcome = await upload(info, '/tmp/upload', 2 * MEMORY_MB);
      assert.match(outcome, /^failed/, 'the daemon did not live to answer');
      let dead: SandboxInfo | undefined;
      for (let i = 0; i < 200 && dead?.state !== 'dead'; i++) {
        dead = await driver.inspect('oom-daemon');
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.equal(dead?.state, 'dead');
      const end = dead?.ended;
      assert.ok(end && end.oomKills >= 1, JSON.stringify(end));
      assert.equal(end.memoryLimitBytes, MEMORY_MB * MB);
      assert.ok(
        (end.diskUsedBytes ?? 0) > (MEMORY_MB / 2) * MB,
        `its files held the memory: ${JSON.stringify(end)}`,
      );
    },
  );
});
