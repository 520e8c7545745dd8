// The archive of a built app (app-archive.ts, decision 094): its bytes depend on the files alone (not their times or
// the order the directory lists them in), so the digest recorded at build is what a copy on another node hashes to;
// a copy unpacks only with that digest, leaving nothing otherwise (rotted bytes, a cut stream, a name leaving the
// directory).
import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { pack } from 'tar-stream';
import { AppCopyError, appArchiveDigest, appEntries, packApp, unpackApp } from './app-archive.js';

const root = mkdtempSync(join(tmpdir(), 'berth-app-archive-'));
after(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
/** An app directory like a Node build's: files, an executable, a nested dir, a `.bin` symlink. */
function app(extra: Record<string, string> = {}): string {
  const dir = join(root, `app-${n++}`);
  mkdirSync(join(dir, 'node_modules/.bin'), { recursive: true });
  mkdirSync(join(dir, 'node_modules/tool'), { recursive: true });
  writeFileSync(join(dir, 'index.js'), 'console.log("hi")\n');
  writeFileSync(join(dir, 'node_modules/tool/cli.js'), '#!/usr/bin/env node\n');
  chmodSync(join(dir, 'node_modules/tool/cli.js'), 0o755);
  symlinkSync('../tool/cli.js', join(dir, 'node_modules/.bin/tool'));
  for (const [k, v] of Object.entries(extra)) writeFileSync(join(dir, k), v);
  return dir;
}

async function bytesOf(s: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

describe('the archive of a built app', () => {
  it('lists entries sorted, each directory before its children, modes reduced', () => {
    const e = appEntries(app());
    assert.deepEqual(
      e.map((x) => [x.name, x.type, x.mode.toString(8)]),
      [
        ['index.js', 'file', '644'],
        ['node_modules/', 'directory', '755'],
        ['node_modules/.bin/', 'directory', '755'],
        ['node_modules/.bin/tool', 'symlink', '777'],
        ['node_modules/tool/', 'directory', '755'],
        ['node_modules/tool/cli.js', 'file', '755'],
      ],
    );
  });

  it('gives the same digest for the same files whatever their times, another for other bytes or modes', async () => {
    const a = app();
    const b = app();
    utimesSync(join(b, 'index.js'), new Date(2001, 1, 1), new Date(2001, 1, 1));
    const da = await appArchiveDigest(a);
    assert.match(da.digest, /^sha256:[0-9a-f]{64}$/);
    assert.deepEqual(await appArchiveDigest(b), da);
    assert.equal((await bytesOf(packApp(a))).length, da.size);
    writeFileSync(join(b, 'index.js'), 'console.log("ho")\n');
    assert.notEqual((await appArchiveDigest(b)).digest, da.digest);
    const c = app();
    chmodSync(join(c, 'index.js'), 0o755);
    assert.notEqual((await appArchiveDigest(c)).digest, da.digest);
  });

  it('unpacks a copy with the recorded digest in place, files, modes and links as built', async () => {
    const src = app({ 'data.bin': 'x'.repeat(100_000) });
    const { digest, size } = await appArchiveDigest(src);
    const dest = join(root, 'copy-ok');
    assert.equal(await unpackApp(packApp(src), dest, digest, 'app k'), size);
    assert.equal(readFileSync(join(dest, 'data.bin'), 'utf8').length, 100_000);
    assert.equal(statSync(join(dest, 'node_modules/tool/cli.js')).mode & 0o777, 0o755);
    assert.equal(statSync(join(dest, 'index.js')).mode & 0o777, 0o644);
    assert.equal(statSync(dest).mode & 0o777, 0o755);
    assert.equal(readlinkSync(join(dest, 'node_modules/.bin/tool')), '../tool/cli.js');
    // The copy hashes to the same digest: a node holding a copy gives the same bytes again.
    assert.equal((await appArchiveDigest(dest)).digest, digest);
    assert.deepEqual(
      readdirSync(root).filter((f) => f.includes('.partial-')),
      [],
    );
  });

  it('refuses other bytes than the digest, a cut stream and a name leaving the directory, leaving nothing', async () => {
    const src = app();
    const { digest } = await appArchiveDigest(src);
    const rotted = app({ 'index.js': 'console.log("rot")\n' });
    const dest = join(root, 'copy-bad');
    await assert.rejects(unpackApp(packApp(rotted), dest, digest, 'app k'), (e) => {
      assert.ok(e instanceof AppCopyError);
      assert.match(e.message, /app k: the archive arrived with digest sha256:[0-9a-f]+, not sha256:/);
      return true;
    });
    const whole = await bytesOf(packApp(src));
    await assert.rejects(
      unpackApp(Readable.from([whole.subarray(0, 700)]), dest, digest, 'app k'),
      AppCopyError,
    );
    const evil = pack();
    evil.entry({ name: '../escaped', size: 1 }, 'x');
    evil.finalize();
    await assert.rejects(
      unpackApp(Readable.from(evil as AsyncIterable<Buffer>), dest, digest, 'app k'),
      AppCopyError,
    );
    assert.equal(existsSync(dest), false);
    assert.equal(existsSync(join(root, 'escaped')), false);
    assert.deepEqual(
      readdirSync(root).filter((f) => f.includes('.partial-')),
      [],
    );
  });
});
