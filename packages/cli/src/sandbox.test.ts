// `berth sandbox ...` as a user runs it: the built binary, as a child process, against a real server and real
// sandboxes (run as root).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../../server/test/sandboxes/support.js';
import { commandLine } from './sandbox-exec.js';
import { parseRemote } from './sandbox-cp.js';

const BIN = join(import.meta.dirname, '../bin/berth.mjs');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('berth sandbox', () => {
  let s: SandboxServer;
  let dir: string;
  let env: Record<string, string>;

  function berth(args: string[], input = ''): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { env, cwd: dir });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => {
        stdout += d;
      });
      child.stderr.on('data', (d) => {
        stderr += d;
      });
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(input);
    });
  }

  before(async () => {
    s = await startSandboxServer();
    dir = mkdtempSync(join(tmpdir(), 'berth-cli-sbx-'));
    env = {
      PATH: process.env.PATH ?? '',
      HOME: dir,
      BERTH_CONFIG: join(dir, 'none.yaml'),
      BERTH_URL: s.url,
      BERTH_API_KEY: s.adminKey,
    };
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates, lists, shows and deletes a sandbox', async () => {
    const created = await berth([
      'sandbox',
      'create',
      'cli-box',
      '--memory',
      '256',
      '--ttl',
      '1h',
      '-e',
      'GREETING=hello',
    ]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /^NAME\s+STATUS\s+STATE/);
    assert.match(created.stdout, /cli-box\s+DEPLOYED\s+RUNNING\s+256MB/);
    const list = await berth(['sandbox', 'list']);
    assert.match(list.stdout, /cli-box\s+DEPLOYED/);
    const got = JSON.parse((await berth(['sandbox', 'get', 'cli-box', '-o', 'json'])).stdout);
    assert.equal(got.spec.runtime.ttl, '1h');
    const env = await berth(['sandbox', 'exec', 'cli-box', '--', 'printenv', 'GREETING']);
    assert.equal(env.stdout, 'hello\n');
    const del = await berth(['sandbox', 'delete', 'cli-box']);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(del.stdout, 'sandbox/cli-box deleted (TERMINATED)\n');
    const missing = await berth(['sandbox', 'exec', 'no-such-box', '--', 'true']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /not found/);
  });

  it('exec prints the output streams apart and exits with the command’s code', async () => {
    await s.create('cli-exec');
    const r = await berth([
      'sandbox',
      'exec',
      'cli-exec',
      '--',
      'sh',
      '-c',
      'echo out; echo err >&2; exit 7',
    ]);
    assert.equal(r.code, 7);
    assert.equal(r.stdout, 'out\n');
    assert.equal(r.stderr, 'err\n');
    const quoted = await berth(['sandbox', 'exec', 'cli-exec', '--', 'echo', "it's", 'a b']);
    assert.equal(quoted.stdout, "it's a b\n");
  });

  it('cp copies a file into a sandbox and back, byte for byte', async () => {
    await s.create('cli-cp');
    const local = join(dir, 'data.bin');
    const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
    writeFileSync(local, bytes, { mode: 0o640 });
    const up = await berth(['sandbox', 'cp', local, 'cli-cp:/home/user/data.bin']);
    assert.equal(up.code, 0, up.stderr);
    const ls = await berth(['sandbox', 'exec', 'cli-cp', '--', 'stat', '-c', '%s %a', '/home/user/data.bin']);
    assert.equal(ls.stdout, '70000 640\n');
    const down = await berth(['sandbox', 'cp', 'cli-cp:/home/user/data.bin', join(dir, 'back.bin')]);
    assert.equal(down.code, 0, down.stderr);
    assert.deepEqual(readFileSync(join(dir, 'back.bin')), bytes);
    const intoDir = await berth(['sandbox', 'cp', 'cli-cp:/home/user/data.bin', dir]);
    assert.equal(intoDir.code, 0, intoDir.stderr);
    assert.equal(statSync(join(dir, 'data.bin')).size, 70_000);
    const both = await berth(['sandbox', 'cp', 'a:/x', 'b:/y']);
    assert.equal(both.code, 1);
    assert.match(both.stderr, /one side must be/);
  });

  it('logs prints a process’s output by stream, and --follow streams until it ends', async () => {
    const box = await s.create('cli-logs');
    const done = await s.run(`${box.metadata.url}/process`, {
      method: 'POST',
      json: { name: 'greeter', command: 'echo hello; echo oops >&2', waitForCompletion: true },
    });
    assert.equal(done.status, 200, await done.clone().text());
    const logs = await berth(['sandbox', 'logs', 'cli-logs', 'greeter']);
    assert.equal(logs.code, 0, logs.stderr);
    assert.equal(logs.stdout, 'hello\n');
    assert.equal(logs.stderr, 'oops\n');

    const started = await s.run(`${box.metadata.url}/process`, {
      method: 'POST',
      json: { name: 'counter', command: 'for i in 1 2 3; do echo $i; sleep 0.3; done; echo bye >&2' },
    });
    assert.equal(started.status, 200, await started.clone().text());
    const follow = await berth(['sandbox', 'logs', 'cli-logs', 'counter', '--follow']);
    assert.equal(follow.code, 0, follow.stderr);
    assert.equal(follow.stdout, '1\n2\n3\n', 'every line, then the command returns when the process ends');
    assert.equal(follow.stderr, 'bye\n');

    const missing = await berth(['sandbox', 'logs', 'cli-logs', 'nope']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /logs of nope failed \(HTTP 404\)/);
  });

  it('shell runs what is typed on a terminal and exits with the shell’s code', async () => {
    await s.create('cli-shell');
    const r = await berth(['sandbox', 'shell', 'cli-shell'], 'echo "sum=$((20+22))"\nexit 5\n');
    assert.equal(r.code, 5, r.stderr);
    assert.match(r.stdout, /sum=42/);
  });
});

describe('berth sandbox argument parsing', () => {
  it('joins several words with shell quoting and keeps one word as a command line', () => {
    assert.equal(commandLine(['ls', '-la', '/tmp']), 'ls -la /tmp');
    assert.equal(commandLine(['echo', "it's", 'a b']), `echo 'it'\\''s' 'a b'`);
    assert.equal(commandLine(['cd /tmp && ls']), 'cd /tmp && ls');
  });

  it('tells a sandbox path from a local one', () => {
    assert.deepEqual(parseRemote('box:/tmp/a'), { sandbox: 'box', path: '/tmp/a' });
    assert.deepEqual(parseRemote('my-box:notes.txt'), { sandbox: 'my-box', path: 'notes.txt' });
    assert.equal(parseRemote('./box:/tmp'), undefined);
    assert.equal(parseRemote('/abs/path'), undefined);
    assert.equal(parseRemote('Box:/x'), undefined);
  });
});
