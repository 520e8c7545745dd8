// One snapshot layer made of a stack of them (decision 053, second pass): what the stack shows over whatever lies
// below it (an image, the host's userland), so that restore→snapshot cycles can go on past the bound of lowers an
// overlay takes. Layers are merged bottom to top as overlayfs reads them: a whiteout (a 0/0 character device) or an
// opaque directory (trusted.overlay.opaque=y) of a layer drops what the layers below had at that path, and is kept in
// the merge (it must still hide the image's file); any other entry replaces the one below, except a directory over a
// directory, whose contents merge. Layers never change once written and share the data dir's filesystem, so a file
// of the merge is a hard link to the layer's: a squash writes no file's bytes again.
import { spawn } from 'node:child_process';
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  rmSync,
  type Stats,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { extract } from 'tar-stream';
import { copyEntries } from './changes.js';

const OPAQUE_XATTR = 'SCHILY.xattr.trusted.overlay.opaque';

const kind = (mode: number) => mode & 0o170000;
const isWhiteout = (st: Stats) => st.isCharacterDevice() && st.rdev === 0;

/** Writes into the empty directory `dest` one layer showing what the stack `layers` (topmost first) shows. */
export async function squashLayers(layers: string[], dest: string): Promise<void> {
  mkdirSync(dest, { recursive: true, mode: 0o755 });
  for (const layer of [...layers].reverse())
    for (const overlay of readdirSync(layer))
      await apply(join(layer, overlay), join(dest, overlay), `${dest}.${overlay}.list`);
}

/** Lays the overlay upper `src` over the merge so far `dest`. */
async function apply(src: string, dest: string, listFile: string): Promise<void> {
  mkdirSync(dest, { recursive: true, mode: 0o755 });
  const entries: { rel: string; st: Stats }[] = [];
  const walk = (rel: string) => {
    for (const e of readdirSync(join(src, rel))) {
      const r = rel ? `${rel}/${e}` : e;
      const st = lstatSync(join(src, r));
      entries.push({ rel: r, st });
      if (st.isDirectory()) walk(r);
    }
  };
  walk('');
  const dirs = entries.filter((e) => e.st.isDirectory()).map((e) => e.rel);
  const opaque = dirs.length ? await opaqueDirs(src, dirs, listFile) : new Set<string>();
  const viaTar: string[] = [];
  const files: string[] = [];
  for (const { rel, st } of entries) {
    const to = join(dest, rel);
    const there = existsSync(to) ? lstatSync(to) : undefined;
    if (there && (!st.isDirectory() || opaque.has(rel) || kind(there.mode) !== kind(st.mode)))
      rmSync(to, { recursive: true, force: true });
    if (st.isDirectory() || isWhiteout(st)) viaTar.push(rel);
    else if (st.isFile() || st.isSymbolicLink()) files.push(rel);
    // Other devices and FIFOs are copied as they are, as the capture did.
    else viaTar.push(rel);
  }
  if (viaTar.length) await copyEntries(src, dest, viaTar, listFile);
  for (const rel of files) linkSync(join(src, rel), join(dest, rel));
}

/** The directories of `list` (relative to `src`) that carry overlayfs' opaque mark, read from tar's own archive. */
function opaqueDirs(src: string, list: string[], listFile: string): Promise<Set<string>> {
  return new Promise((resolve, reject) => {
    writeFileSync(listFile, `${list.map((r) => `./${r}`).join('\0')}\0`, { mode: 0o600 });
    const tar = spawn(
      'tar',
      [
        '-C',
        src,
        '--xattrs',
        '--xattrs-include=trusted.overlay.opaque',
        '--format=posix',
        '--no-recursion',
        '--null',
        '-T',
        listFile,
        '-cf',
        '-',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    tar.stderr.on('data', (d) => {
      err += d;
    });
    const found = new Set<string>();
    const ex = extract();
    ex.on('entry', (h, stream, next) => {
      if ((h.pax as Record<string, string> | undefined)?.[OPAQUE_XATTR] === 'y')
        found.add(h.name.replace(/^\.\//, '').replace(/\/$/, ''));
      stream.on('end', next);
      stream.resume();
    });
    ex.on('error', reject);
    let code: number | null | undefined;
    let ended = false;
    const done = () => {
      if (code === undefined || !ended) return;
      rmSync(listFile, { force: true });
      if (code === 0) resolve(found);
      else reject(new Error(`reading the layer's directories failed: ${err.trim().slice(0, 500)}`));
    };
    ex.on('finish', () => {
      ended = true;
      done();
    });
    tar.on('error', reject);
    tar.on('close', (c) => {
      code = c;
      done();
    });
    tar.stdout.pipe(ex);
  });
}
