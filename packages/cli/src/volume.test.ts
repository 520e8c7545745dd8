// `berth volume-template push` and `berth volume create|list|delete` as a child process against a real server
// (real loop-mounted images: root only).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../server/src/test-support/server.js';

const BIN = join(import.meta.dirname, '../../..', 'packages/cli/bin/berth.mjs');

describe('berth volume and volume-template', {
  skip: process.getuid?.() !== 0 && 'volumes need root',
}, () => {
  let s: TestServer;
  let dir: string;
  let env: Record<string, string>;
  const berth = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
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
    });

  before(async () => {
    s = await startTestServer();
    dir = mkdtempSync(join(tmpdir(), 'berth-cli-vol-'));
    env = {
      PATH: process.env.PATH ?? '',
      HOME: dir,
      BERTH_CONFIG: join(dir, 'cfg', 'config.yaml'),
      BERTH_URL: s.url,
      BERTH_API_KEY: s.adminKey ?? '',
    };
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('pushes a directory as a template version, creates a volume from it, lists it and deletes it', async () => {
    mkdirSync(join(dir, 'seed', 'sub'), { recursive: true });
    writeFileSync(join(dir, 'seed', 'sub', 'a.txt'), 'seeded');
    const push = await berth([
      'volume-template',
      'push',
      'starter',
      join(dir, 'seed'),
      '--version-name',
      'v1',
    ]);
    assert.equal(push.code, 0, push.stderr);
    assert.match(push.stdout, /volume-template\/starter version v1 uploaded \(\d+ bytes\)/);
    const versions = await (await s.api('/volume_templates/starter/versions')).json();
    assert.deepEqual(
      versions.map((v: any) => v.name),
      ['v1'],
    );

    const created = await berth(['volume', 'create', 'data', '--size', '32', '--template', 'starter:v1']);
    assert.equal(created.code, 0, created.stderr);
    for (let i = 0; i < 200; i++) {
      if ((await (await s.api('/volumes/data')).json()).status !== 'DEPLOYING') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const list = await berth(['volume', 'list']);
    assert.match(list.stdout, /data\s+DEPLOYED\s+32MB\s+-\s+starter:v1/);
    const del = await berth(['volume', 'delete', 'data']);
    assert.equal(del.code, 0, del.stderr);
    // The answer is the state at the call: still DELETING, or TERMINATED when the unmount finished first.
    assert.match(del.stdout, /volume\/data deleted \((DELETING|TERMINATED)\)/);
    let gone = 0;
    for (let i = 0; i < 200 && gone !== 404; i++) {
      gone = (await s.api('/volumes/data')).status;
      if (gone !== 404) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(gone, 404);
  });
});
