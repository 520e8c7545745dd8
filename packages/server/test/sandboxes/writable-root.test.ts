// A sandbox's root is its whole image, writable on top, through the whole server (decision 051): the unmodified
// @blaxel/core session test writes /session-test.txt on the default image; package-manager writes into /usr and /etc
// of an image sandbox stay across standby; `berth image build` builds from a Dockerfile (on a loopback registry's base)
// into the workspace, a sandbox runs the result, and a build that cannot be done fails naming the instruction.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  Pusher,
  startRegistry,
  type TarEntry,
  type TestRegistry,
  tarOf,
} from '../../src/runtime/images/test-support/registry.js';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { berth } from '../berth-cli.js';
import { exec, type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

const APPLETS = ['sh', 'cat', 'echo', 'mkdir', 'rm', 'cp', 'id', 'ls', 'touch'];

async function baseLayer(): Promise<Buffer> {
  const entries: TarEntry[] = [
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', body: readFileSync('/bin/busybox'), mode: 0o755 },
    ...APPLETS.map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', body: 'root:x:0:0:root:/root:/bin/sh\n' },
    { name: 'etc/os-release', body: 'ID=base\n' },
    { name: 'usr/', type: 'directory' },
    { name: 'usr/lib/', type: 'directory' },
  ];
  return tarOf(entries);
}

describe('the writable root and Dockerfile builds through the server', () => {
  let s: SandboxServer;
  let reg: TestRegistry;
  let base: string;
  let dir: string;
  before(async () => {
    [s, reg] = await Promise.all([
      startSandboxServer({ ...OUTBOUND_LOOPBACK, BERTH_STANDBY_AFTER: '1' }),
      startRegistry(),
    ]);
    base = (await new Pusher(reg).image('test/base', '1', [await baseLayer()], { Env: ['PATH=/bin'] }))
      .reference;
    dir = mkdtempSync(join(tmpdir(), 'berth-wroot-'));
  });
  after(async () => {
    await s.close();
    await reg.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('@blaxel/core writes /session-test.txt through a session (the service SDK test)', async () => {
    const stdout = await runBlaxelScript(join(import.meta.dirname, 'blaxel-session-root.mjs'), s, {
      SANDBOX_NAME: 'session-root',
      SANDBOX_MEMORY: String(TEST_MEMORY_MB),
    });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    assert.deepEqual(JSON.parse(line.slice(7)), {
      viaSession: 'Hello from a session',
      viaSandbox: 'Hello from a session',
      cat: 'Hello from a session',
    });
  });

  it('writes into /usr and /etc of an image sandbox stay across standby', async () => {
    const created = await s.create('pkg-box', { runtime: { image: base } });
    const url = created.metadata.url;
    const w = await exec(
      s,
      url,
      'sh -c "mkdir -p /usr/lib/pkg && echo lib > /usr/lib/pkg/f && echo PKG=1 >> /etc/os-release"',
    );
    assert.equal(w.exitCode, 0, JSON.stringify(w));
    await s.waitFor('pkg-box', (b) => b.state === 'STANDBY', 'state STANDBY');
    const r = await exec(s, url, 'sh -c "cat /usr/lib/pkg/f /etc/os-release"');
    assert.equal(r.stdout, 'lib\nID=base\nPKG=1\n');
    const image = await (await s.api(`/images/${encodeURIComponent(base)}`)).json();
    assert.ok(image.metadata.lastDeployedAt, "the sandbox start is the image's lastDeployedAt");
  });

  it('berth image build: a Dockerfile builds into the workspace and a sandbox runs it', async () => {
    const ctx = join(dir, 'app');
    mkdirSync(ctx);
    writeFileSync(
      join(ctx, 'Dockerfile'),
      `FROM ${base}\nWORKDIR /app\nCOPY hello.txt .\nRUN echo built > built.txt\nCMD ["cat", "/app/hello.txt"]\n`,
    );
    writeFileSync(join(ctx, 'hello.txt'), 'hello from the context\n');
    writeFileSync(join(ctx, 'notes.tmp'), 'left out\n');
    writeFileSync(join(ctx, '.dockerignore'), '*.tmp\n');
    const r = await berth(s, ['image', 'build', ctx, '-t', 'app:1']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.stdout, /Step 4\/5 : RUN echo built > built.txt/);
    assert.match(r.stdout, /Successfully tagged docker\.io\/library\/app:1/);
    const again = await berth(s, ['image', 'build', ctx, '-t', 'app:1']);
    assert.equal(again.stdout.match(/Using cache/g)?.length, 3, again.out);
    const created = await s.create('built-box', { runtime: { image: 'app:1' } });
    const out = await exec(s, created.metadata.url, 'sh -c "cat /app/hello.txt /app/built.txt; ls /app"');
    assert.equal(out.stdout, 'hello from the context\nbuilt\nbuilt.txt\nhello.txt\n');
  });

  it('a build that cannot be done fails naming the instruction, before or while it runs', async () => {
    const ctx = join(dir, 'bad');
    mkdirSync(ctx);
    writeFileSync(join(ctx, 'Dockerfile'), `FROM ${base}\nHEALTHCHECK CMD true\n`);
    const refused = await berth(s, ['image', 'build', ctx, '-t', 'bad:1']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /line 2: HEALTHCHECK is not supported/);
    writeFileSync(join(ctx, 'Dockerfile'), `FROM ${base}\nRUN echo doomed && false\n`);
    const failed = await berth(s, ['image', 'build', ctx, '-t', 'bad:1']);
    assert.equal(failed.code, 1);
    assert.match(failed.stdout, /doomed/);
    assert.match(failed.stderr, /RUN echo doomed && false: the command exited with code 1/);
    assert.equal((await s.api('/images/bad:1')).status, 404);
  });
});
