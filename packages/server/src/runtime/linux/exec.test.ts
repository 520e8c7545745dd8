// The host-tool runner: each command's answer or failure (stderr, exit code) reaches its own caller through the
// long-lived host-tool process, which is restarted after it dies and ended by the last release.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { CommandError, HostTools, sleep } from './exec.js';

const tools = new HostTools();
after(() => tools.stop());

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('a failing command rejects with its stderr and exit code', async () => {
  const err = await tools.run('sh', ['-c', 'echo out; echo "no such table" >&2; exit 3']).catch((e) => e);
  assert.ok(err instanceof CommandError);
  assert.equal(err.exitCode, 3);
  assert.equal(err.stderr, 'no such table\n');
  assert.equal(err.command, 'sh -c echo out; echo "no such table" >&2; exit 3');
  assert.match(err.message, /failed \(3\): no such table$/);
});

test('a missing tool rejects with the spawn error and no exit code', async () => {
  const err = await tools.run('/nonexistent/berth-tool', ['x']).catch((e) => e);
  assert.ok(err instanceof CommandError);
  assert.equal(err.exitCode, null);
  assert.match(err.stderr, /ENOENT/);
});

test('input goes to the tool on stdin and its stdout comes back', async () => {
  assert.equal(await tools.run('cat', [], 'add element x\n'), 'add element x\n');
});

test('many commands at once each get their own answer', async () => {
  const n = 40;
  const fails = (i: number) => i % 4 === 3;
  const outs = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      fails(i)
        ? tools
            .run('sh', ['-c', `echo ${i} >&2; exit ${1 + (i % 7)}`])
            .catch((e: CommandError) => `err ${e.stderr.trim()} ${e.exitCode}`)
        : tools.run('sh', ['-c', `sleep 0.0${i % 5}; echo ${i}`]),
    ),
  );
  for (const [i, out] of outs.entries()) assert.equal(out, fails(i) ? `err ${i} ${1 + (i % 7)}` : `${i}\n`);
});

test('a tool past its timeout is ended and its command fails', async () => {
  const quick = new HostTools(300);
  try {
    const err = await quick.run('sleep', ['10']).catch((e) => e);
    assert.ok(err instanceof CommandError);
    assert.equal(err.command, 'sleep 10');
    assert.equal(err.exitCode, null);
  } finally {
    await quick.stop();
  }
});

test('killed host-tool processes fail the commands in flight, and the next command runs in a new one', async () => {
  await tools.run('true', []);
  const inFlight = tools.run('sleep', ['10']).catch((e) => e);
  await sleep(100);
  const killed = tools.pids;
  assert.ok(killed.length);
  for (const pid of killed) process.kill(pid, 'SIGKILL');
  const err = await inFlight;
  assert.ok(err instanceof CommandError);
  assert.match(err.message, /host-tool process ended before answering \(it was killed \(SIGKILL\)\)/);
  // Each death is seen when its channel closes; a command sent before that goes down with it.
  while (tools.pids.some((p) => killed.includes(p))) await sleep(10);
  assert.equal(await tools.run('echo', ['again']), 'again\n');
  assert.ok(tools.pids.length && tools.pids.every((p) => !killed.includes(p)));
});

test('commands sent at once are spread over up to the set number of processes', async () => {
  const spread = new HostTools(undefined, 2);
  try {
    const outs = await Promise.all(
      Array.from({ length: 6 }, (_, i) => spread.run('sh', ['-c', `sleep 0.3; echo ${i}`])),
    );
    assert.deepEqual(outs, ['0\n', '1\n', '2\n', '3\n', '4\n', '5\n']);
    assert.equal(spread.pids.length, 2);
  } finally {
    await spread.stop();
  }
});

test('the last release stops the process; a stopped one fails what it had not answered', async () => {
  const own = new HostTools();
  own.retain();
  own.retain();
  await own.run('true', []);
  const [pid] = own.pids;
  assert.ok(pid && alive(pid));
  const inFlight = own.run('sleep', ['10']).catch((e) => e);
  await own.release();
  assert.ok(alive(pid), 'still used by the other holder');
  await own.release();
  assert.deepEqual(own.pids, []);
  assert.equal(alive(pid), false);
  const err = await inFlight;
  assert.ok(err instanceof CommandError);
  assert.match(err.message, /ended before answering \(it was stopped\)/);
});

test("a detached start gets its data on fd 3 and its files from fd 4, and returns the running process's pid", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-exec-'));
  try {
    const file = join(dir, 'filter');
    writeFileSync(file, 'from a file');
    const out = join(dir, 'out');
    const pid = await tools.startDetached({
      cmd: '/bin/sh',
      args: ['-c', 'cat <&3 > "$OUT"; cat <&4 >> "$OUT"; echo logged; sleep 10'],
      env: { PATH: '/usr/bin:/bin', OUT: out },
      logFile: join(dir, 'log'),
      files: [file],
      data: 'opts\0',
    });
    try {
      assert.ok(alive(pid));
      for (let i = 0; i < 200 && !readFileSync(join(dir, 'log'), 'utf8'); i++) await sleep(20);
      assert.equal(readFileSync(out, 'utf8'), 'opts\0from a file');
      assert.equal(readFileSync(join(dir, 'log'), 'utf8'), 'logged\n');
      // Its own session: it outlives whatever started it.
      assert.equal(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[3], String(pid));
    } finally {
      process.kill(pid, 'SIGKILL');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a detached start whose file is missing fails with the open error', async () => {
  const err = await tools
    .startDetached({
      cmd: '/bin/true',
      args: [],
      env: {},
      logFile: '/dev/null',
      files: ['/nonexistent/f'],
      data: '',
    })
    .catch((e) => e);
  assert.match(err.message, /ENOENT.*\/nonexistent\/f/);
});

test("no tool it runs holds the host-tool process's channel", async () => {
  await tools.run('true', []);
  const channels = tools.pids.map((pid) => readlinkSync(`/proc/${pid}/fd/3`));
  for (const c of channels) assert.match(c, /^socket:/);
  const held = await tools.run('sh', ['-c', 'for f in /proc/$$/fd/*; do readlink "$f"; done; true']);
  for (const c of channels) assert.ok(!held.split('\n').includes(c), held);
});

test('arguments the spawn refuses fail that command only', async () => {
  await tools.run('true', []);
  const pids = tools.pids;
  const err = await tools.run('echo', ['a\0b']).catch((e) => e);
  assert.ok(err instanceof CommandError);
  assert.match(err.stderr, /null bytes/);
  assert.equal(await tools.run('echo', ['ok']), 'ok\n');
  assert.deepEqual(tools.pids, pids);
});

test("the signals a server's process group gets (Ctrl-C, a service manager's SIGTERM) leave it running", async () => {
  await tools.run('true', []);
  const pids = tools.pids;
  assert.ok(pids.length);
  for (const pid of pids)
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.kill(pid, signal);
  await sleep(200);
  assert.equal(await tools.run('echo', ['still']), 'still\n');
  assert.deepEqual(tools.pids, pids);
});
