// `berth image pull|list|import|rm`, the built binary against a real server and a real loopback registry.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  busyboxLayer,
  Pusher,
  startRegistry,
  type TestRegistry,
} from '../../server/src/runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../../server/src/test-support/server.js';

const BIN = join(import.meta.dirname, '../bin/berth.mjs');

describe('berth image', () => {
  let s: TestServer;
  let reg: TestRegistry;
  let dir: string;
  let ref: string;
  const berth = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        BERTH_URL: s.url,
        BERTH_API_KEY: s.adminKey,
        BERTH_CONFIG: join(dir, 'c.yaml'),
      };
      const child = spawn(process.execPath, [BIN, ...args], { env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });

  before(async () => {
    // The registry listens on loopback.
    [s, reg] = await Promise.all([startTestServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
    dir = mkdtempSync(join(tmpdir(), 'berth-cli-img-'));
    ref = (await new Pusher(reg).image('cli/box', 'v1', [await busyboxLayer()])).reference;
  });
  after(async () => {
    await s.close();
    await reg.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('pulls, lists, imports and removes', async () => {
    const pull = await berth(['image', 'pull', ref]);
    assert.equal(pull.code, 0, pull.stderr);
    assert.match(pull.stdout, /cli\/box:v1/);
    const file = join(dir, 'saved.tar');
    execFileSync('skopeo', [
      'copy',
      '--quiet',
      '--src-tls-verify=false',
      `docker://${ref}`,
      `oci-archive:${file}:v1`,
    ]);
    const imp = await berth(['image', 'import', file, '--name', 'local/box:v1']);
    assert.equal(imp.code, 0, imp.stderr);
    const list = JSON.parse((await berth(['image', 'list', '-o', 'json'])).stdout);
    assert.equal(list.length, 1, 'one image under two names');
    assert.deepEqual(list[0].references.sort(), ['docker.io/local/box:v1', `${ref}`].sort());
    const rm = await berth(['image', 'rm', ref]);
    assert.equal(rm.code, 0, rm.stderr);
    assert.equal((await berth(['image', 'rm', 'local/box:v1'])).code, 0);
    assert.deepEqual(JSON.parse((await berth(['image', 'list', '-o', 'json'])).stdout), []);
    const bad = await berth(['image', 'pull', 'Not Valid']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /is not an image reference/);
  });
});
