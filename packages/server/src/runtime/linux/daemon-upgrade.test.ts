// POST /upgrade in a real sandbox running the bundled daemon: the server's code changes on disk (here, a copy of
// the bundle whose version is rewritten), and the running daemon takes the new code without losing a process.
import assert from 'node:assert/strict';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import { DAEMON_ENTRY, defaultCodeDir } from './host.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { callSocket } from './test-support/mini-daemon.js';

let dataDir: string;
let codeDir: string;
let driver: LinuxDriver;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-upg-'));
  codeDir = join(dataDir, 'code');
  mkdirSync(join(codeDir, 'sandbox-api'), { recursive: true });
  chmodSync(dataDir, 0o755); // the sandbox's unprivileged uid must read the code, like a real dist dir
  chmodSync(codeDir, 0o755);
  chmodSync(join(codeDir, 'sandbox-api'), 0o755);
  copyFileSync(join(defaultCodeDir(), DAEMON_ENTRY), join(codeDir, DAEMON_ENTRY));
  chmodSync(join(codeDir, DAEMON_ENTRY), 0o644);
  driver = await createLinuxDriver({ dataDir: join(dataDir, 'data'), codeDir, warmPoolSize: 0 });
});

after(async () => {
  for (const s of (await driver?.list()) ?? []) await driver.remove(s.id);
  await driver?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test('an upgrade takes the code now on disk; a process started before runs on and ends with its exit code', {
  timeout: 90_000,
}, async () => {
  const info = await driver.ensure('upg-box', smallSandboxSpec());
  const sock = info.socketPath;
  const before = (await callSocket(sock, 'GET', '/health')).body;
  const started = await callSocket(sock, 'POST', '/process', {
    name: 'survivor',
    command: 'echo before; sleep 1; echo after; exit 5',
  });
  assert.equal(started.status, 200, JSON.stringify(started.body));

  // The server is upgraded: its daemon bundle now says another version.
  const file = join(codeDir, DAEMON_ENTRY);
  const code = readFileSync(file, 'utf8');
  assert.ok(code.includes(`"${before.version}"`), 'the bundle holds its version string');
  writeFileSync(file, code.replace(`"${before.version}"`, '"9.9.9-upgraded"'));

  const up = await callSocket(sock, 'POST', '/upgrade', {});
  assert.equal(up.status, 200, JSON.stringify(up.body));
  assert.equal(up.body.message, 'daemon upgraded');
  const after = (await callSocket(sock, 'GET', '/health')).body;
  assert.equal(after.version, '9.9.9-upgraded', 'the new code answers');
  assert.equal(after.startedAt, before.startedAt, 'in the same daemon process');

  let p = (await callSocket(sock, 'GET', '/process/survivor')).body;
  assert.equal(p.status, 'running');
  for (let i = 0; i < 200 && p.status === 'running'; i++) {
    await new Promise((r) => setTimeout(r, 25));
    p = (await callSocket(sock, 'GET', '/process/survivor')).body;
  }
  assert.equal(p.exitCode, 5);
  assert.equal(p.stdout, 'before\nafter\n');
});
