// The upload's archive rules: a path climbing out, an absolute path and a symbolic link are each refused, and
// nothing is written outside the destination; a plain archive unpacks with its files and executable bits.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import yazl from 'yazl';
import { entryPath, extractZip, UnsafeArchiveError } from './zip-extract.js';

const root = mkdtempSync(join(tmpdir(), 'berth-zip-'));
after(() => rmSync(root, { recursive: true, force: true }));

interface Entry {
  name: string;
  data?: string;
  mode?: number;
}

/** Writes a zip; names are patched after adding, as a hostile client would (yazl itself refuses them). */
async function zipOf(file: string, entries: Entry[]) {
  const z = new yazl.ZipFile();
  for (const e of entries)
    z.addBuffer(Buffer.from(e.data ?? 'x'), 'placeholder', { mode: e.mode ?? 0o100644 });
  (z as any).entries.forEach((en: any, i: number) => {
    en.utf8FileName = Buffer.from(entries[i].name);
  });
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  writeFileSync(file, Buffer.concat(chunks));
  return file;
}

describe('extractZip', () => {
  it('unpacks files with their executable bit', async () => {
    const zip = await zipOf(join(root, 'ok.zip'), [
      { name: 'src/index.js', data: 'hi' },
      { name: 'bin/run', data: '#!/bin/sh', mode: 0o100755 },
    ]);
    const dest = join(root, 'ok');
    const r = await extractZip(zip, dest);
    assert.equal(r.files, 2);
    assert.equal(readFileSync(join(dest, 'src/index.js'), 'utf8'), 'hi');
    assert.equal(statSync(join(dest, 'bin/run')).mode & 0o111, 0o111);
  });

  for (const [what, name] of [
    ['a path climbing out (zip-slip)', '../../escaped.txt'],
    ['a path climbing out in the middle', 'a/../../escaped.txt'],
    ['an absolute path', '/tmp/escaped-abs.txt'],
    ['a Windows drive path', 'C:\\escaped.txt'],
  ] as const)
    it(`refuses ${what} and writes nothing outside`, async () => {
      const zip = await zipOf(join(root, `bad-${name.length}.zip`), [{ name }]);
      const dest = join(root, `bad-${name.length}`);
      await assert.rejects(extractZip(zip, dest), UnsafeArchiveError);
      assert.equal(existsSync(join(root, 'escaped.txt')), false);
      assert.equal(existsSync('/tmp/escaped-abs.txt'), false);
      await assert.rejects(extractZip(zip), UnsafeArchiveError, 'the check alone refuses it too');
    });

  it('refuses a symbolic link (one pointing out of the tree would be followed by the build)', async () => {
    const zip = await zipOf(join(root, 'link.zip'), [{ name: 'etc', data: '/etc', mode: 0o120777 }]);
    await assert.rejects(extractZip(zip, join(root, 'link')), /symbolic link/);
    assert.equal(existsSync(join(root, 'link', 'etc')), false);
  });

  it('refuses what is not a zip', async () => {
    const f = join(root, 'not.zip');
    writeFileSync(f, 'plain text');
    await assert.rejects(extractZip(f), UnsafeArchiveError);
  });

  it('entryPath keeps plain relative paths', () => {
    assert.deepEqual(entryPath('a/b/./c.txt'), { ok: true, path: 'a/b/c.txt' });
    assert.equal(entryPath('..').ok, false);
  });
});
