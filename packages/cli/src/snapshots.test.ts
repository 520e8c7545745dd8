// `berth sandbox snapshot|restore|fork` and `berth get snapshots` as a user runs them: the built binary against a
// real server and real sandboxes (run as root).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import {
  type SandboxServer,
  startSandboxServer,
  TEST_MEMORY_MB,
} from '../../server/test/sandboxes/support.js';

const BIN = join(import.meta.dirname, '../bin/berth.mjs');
let s: SandboxServer;
let dir: string;
let env: Record<string, string>;

const berth = (args: string[]) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env,
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
  });

before(async () => {
  s = await startSandboxServer();
  dir = mkdtempSync(join(tmpdir(), 'berth-cli-snap-'));
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

it('snapshots a sandbox, lists it, restores it and forks it', async () => {
  assert.equal((await berth(['sandbox', 'create', 'cli-snap', '--memory', String(TEST_MEMORY_MB)])).code, 0);
  assert.equal(
    (await berth(['sandbox', 'exec', 'cli-snap', '--', 'sh', '-c', 'echo one > /home/user/f'])).code,
    0,
  );
  const snap = await berth(['sandbox', 'snapshot', 'cli-snap', 'first']);
  assert.equal(snap.code, 0, snap.stderr);
  assert.match(snap.stdout, /^snapshot\/first snap-[0-9a-f]{16} of sandbox\/cli-snap: /);
  const listed = await berth(['get', 'snapshots']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /NAME\s+ID\s+SOURCE\s+STATUS/);
  assert.match(listed.stdout, /first\s+snap-\S+\s+sandbox\/cli-snap\s+ready/);
  await berth(['sandbox', 'exec', 'cli-snap', '--', 'sh', '-c', 'echo two > /home/user/f']);
  const restored = await berth(['sandbox', 'restore', 'cli-snap', 'first']);
  assert.equal(restored.code, 0, restored.stderr);
  await s.waitFor('cli-snap', (b) => b.status === 'DEPLOYED', 'DEPLOYED');
  assert.equal((await berth(['sandbox', 'exec', 'cli-snap', '--', 'cat', '/home/user/f'])).stdout, 'one\n');
  const forked = await berth(['sandbox', 'fork', 'cli-snap', 'cli-fork', '-e', 'K=v']);
  assert.equal(forked.code, 0, forked.stderr);
  assert.match(forked.stdout, /^sandbox\/cli-fork forked from snap-/);
  assert.equal(
    (await berth(['sandbox', 'exec', 'cli-fork', '--', 'sh', '-c', 'cat /home/user/f; echo $K'])).stdout,
    'one\nv\n',
  );
});
