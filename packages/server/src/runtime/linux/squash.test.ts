// Squashing snapshot layers (decision 053, second pass; needs root for whiteouts and trusted attributes): the merge
// shows what overlayfs shows of the stack — the upper file, a whiteout or an opaque directory dropping what the layers
// below had and kept to hide the image — and links the layers' files rather than copying them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { extract, pack } from 'tar-stream';
import { squashLayers } from './squash.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-squash-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type Entry = {
  name: string;
  type: 'file' | 'directory' | 'character-device';
  body?: string;
  opaque?: boolean;
};

/** Writes a layer's `root` overlay as GNU tar extracts it (the opaque mark is an attribute node cannot set). */
async function layer(name: string, entries: Entry[]): Promise<string> {
  const at = join(dir, name);
  const root = join(at, 'root');
  await new Promise<void>((resolve, reject) => {
    const p = pack();
    const tar = spawn(
      'sh',
      ['-c', `mkdir -p "$0" && tar -C "$0" --xattrs --xattrs-include='*' -xf -`, root],
      {
        stdio: ['pipe', 'inherit', 'inherit'],
      },
    );
    p.pipe(tar.stdin);
    tar.on('close', (c) => (c === 0 ? resolve() : reject(new Error(`tar exited ${c}`))));
    for (const e of entries)
      p.entry(
        {
          name: e.name,
          type: e.type,
          mode: e.type === 'directory' ? 0o755 : 0o644,
          devmajor: 0,
          devminor: 0,
          ...(e.opaque ? { pax: { 'SCHILY.xattr.trusted.overlay.opaque': 'y' } } : {}),
        },
        e.body ?? '',
      );
    p.finalize();
  });
  return at;
}

/** The tree as `path kind [content]`, and which directories are opaque (read back through tar). */
function listing(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const e of readdirSync(join(root, rel)).sort()) {
      const r = rel ? `${rel}/${e}` : e;
      const st = lstatSync(join(root, r));
      if (st.isDirectory()) {
        out.push(`${r}/`);
        walk(r);
      } else if (st.isCharacterDevice()) out.push(`${r} whiteout`);
      else out.push(`${r} ${readFileSync(join(root, r), 'utf8')}`);
    }
  };
  walk('');
  return out;
}

test('a squash merges layers as overlayfs reads them and links their files', async () => {
  const bottom = await layer('l1', [
    { name: 'a', type: 'file', body: '1' },
    { name: 'gone', type: 'file', body: 'x' },
    { name: 'd', type: 'directory' },
    { name: 'd/old', type: 'file', body: 'old' },
    { name: 'keep', type: 'directory' },
    { name: 'keep/k', type: 'file', body: 'k' },
    { name: 'was-dir', type: 'directory' },
    { name: 'was-dir/f', type: 'file', body: 'f' },
  ]);
  const top = await layer('l2', [
    { name: 'a', type: 'file', body: '2' },
    { name: 'gone', type: 'character-device' },
    { name: 'd', type: 'directory', opaque: true },
    { name: 'd/new', type: 'file', body: 'new' },
    { name: 'img', type: 'character-device' },
    { name: 'keep', type: 'directory' },
    { name: 'keep/k2', type: 'file', body: 'k2' },
    { name: 'was-dir', type: 'file', body: 'now a file' },
  ]);
  const merged = join(dir, 'merged');
  await squashLayers([top, bottom], merged);
  assert.deepEqual(listing(join(merged, 'root')), [
    'a 2',
    'd/',
    'd/new new',
    'gone whiteout',
    'img whiteout',
    'keep/',
    'keep/k k',
    'keep/k2 k2',
    'was-dir now a file',
  ]);
  assert.equal(lstatSync(join(merged, 'root', 'a')).ino, lstatSync(join(top, 'root', 'a')).ino, 'linked');
  assert.equal(
    lstatSync(join(merged, 'root', 'keep', 'k')).ino,
    lstatSync(join(bottom, 'root', 'keep', 'k')).ino,
  );
  // The opaque mark stays on the replaced directory (it hides the image's), and only there.
  assert.deepEqual(await opaqueNames(join(merged, 'root')), ['./d/']);
});

/** Names of the entries carrying trusted.overlay.opaque, as GNU tar archives them. */
function opaqueNames(root: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const t = spawn(
      'tar',
      ['-C', root, '--xattrs', '--xattrs-include=trusted.overlay.opaque', '--format=posix', '-cf', '-', '.'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const found: string[] = [];
    const ex = extract();
    ex.on('entry', (h, stream, next) => {
      if ((h.pax as Record<string, string> | undefined)?.['SCHILY.xattr.trusted.overlay.opaque'] === 'y')
        found.push(h.name);
      stream.on('end', next);
      stream.resume();
    });
    ex.on('finish', () => resolve(found));
    ex.on('error', reject);
    t.stdout.pipe(ex);
  });
}
