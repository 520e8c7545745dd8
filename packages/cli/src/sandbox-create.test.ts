// `berth sandbox create` with docker-run flags, as a user runs it (the built binary) against real sandboxes (root) and
// a loopback registry: an image that cannot be pulled exits 1 with the reason; `--volume` mounts a volume, `--port
// 3000:public` opens a public preview; `exec -t` runs on a terminal and `-i` reads stdin; `image rm` of an image a
// sandbox runs on names that sandbox.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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
import { OUTBOUND_LOOPBACK } from '../../server/src/test-support/server.js';
import { type SandboxServer, startSandboxServer } from '../../server/test/sandboxes/support.js';

const BIN = join(import.meta.dirname, '../bin/berth.mjs');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('berth sandbox create, docker-run style', () => {
  let s: SandboxServer;
  let reg: TestRegistry;
  let dir: string;
  let ref: string;
  const berth = (args: string[], input = ''): Promise<Run> =>
    new Promise((resolve) => {
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        BERTH_URL: s.url,
        BERTH_API_KEY: s.adminKey,
        BERTH_CONFIG: join(dir, 'none.yaml'),
      };
      const child = spawn(process.execPath, [BIN, ...args], { env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(input);
    });

  before(async () => {
    // The registry listens on loopback.
    [s, reg] = await Promise.all([startSandboxServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
    dir = mkdtempSync(join(tmpdir(), 'berth-cli-create-'));
    ref = (await new Pusher(reg).image('cli/run', 'v1', [await busyboxLayer()])).reference;
  });
  after(async () => {
    await s.close();
    await reg.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an image that cannot be pulled fails the create: exit 1 with the reason', async () => {
    const r = await berth([
      'sandbox',
      'create',
      'nopull',
      '--memory',
      '256',
      '--image',
      `${reg.host}/cli/none:v9`,
    ]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /^sandbox\/nopull FAILED: .*cli\/none/m);
    assert.equal(r.stdout, '', 'no row claims it runs');
  });

  it('--volume mounts a volume, --port :public opens a preview, -e sets the environment', async () => {
    const vol = await berth(['volume', 'create', 'data', '--size', '64']);
    assert.equal(vol.code, 0, vol.stderr);
    const r = await berth([
      'sandbox',
      'create',
      'runner',
      '--memory',
      '256',
      '--image',
      ref,
      '--volume',
      'data:/data',
      '--port',
      '3000:public',
      '-e',
      'GREETING=hi',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^runner\s+DEPLOYED\s/m);
    assert.match(
      r.stderr,
      /port 3000: http:\/\/\S+\/previews\/runner\/port-3000\S* \(public preview port-3000\)/,
    );
    const sbx = await (await s.api('/sandboxes/runner')).json();
    assert.deepEqual(sbx.spec.volumes, [{ name: 'data', mountPath: '/data' }]);
    assert.deepEqual(
      sbx.spec.runtime.ports.map((p: any) => p.target),
      [3000],
    );
    const preview = await s.api('/sandboxes/runner/previews/port-3000');
    assert.equal((await preview.json()).spec.public, true);

    const echoed = await berth([
      'sandbox',
      'exec',
      'runner',
      '--',
      'sh',
      '-c',
      'echo "$GREETING" > /data/g; cat /data/g',
    ]);
    assert.equal(echoed.code, 0, echoed.stderr);
    assert.equal(echoed.stdout, 'hi\n');
    const piped = await berth(['sandbox', 'exec', '-i', 'runner', '--', 'wc', '-l'], 'a\nb\nc\n');
    assert.equal(piped.stdout.trim(), '3', 'stdin reached the command');
    const tty = await berth([
      'sandbox',
      'exec',
      '-t',
      'runner',
      '--',
      'sh',
      '-c',
      'test -t 1 && echo tty; exit 4',
    ]);
    assert.equal(tty.code, 4, 'the command’s own exit code');
    assert.match(tty.stdout, /tty/);
  });

  it('image rm of an image a sandbox runs on names that sandbox', async () => {
    const r = await berth(['image', 'rm', ref]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /image \S+ is in use by sandbox runner: delete it first/);
  });
});
