// Applies one layer tarball onto an image root being built, refusing anything that could write outside it:
// `..` or absolute names, and any entry whose parent directory is a symlink (a layer that plants `a -> /etc` and
// then writes `a/passwd`). Whiteouts (`.wh.name`) delete from the layers below, opaque markers (`.wh..wh..opq`)
// empty a directory of what the layers below put there. Device nodes and FIFOs are skipped; setuid/setgid bits
// dropped; owners are not kept (one uid exists in a sandbox), so every file gets its owner's permissions for all.
import {
  createWriteStream,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  rmSync,
  symlinkSync,
  chmodSync,
  constants,
} from 'node:fs';
import { join } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import { ImageError } from './errors.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';

export interface LayerLimits {
  /** Uncompressed bytes one layer may expand to (a decompression bomb stops here). */
  maxLayerBytes: number;
}

/** The layer's relative path, or an error for a name that could leave the root. */
function entryPath(name: string, what: string): string[] {
  if (name.startsWith('/'))
    throw new ImageError('UNSAFE_LAYER', `${what}: absolute path ${JSON.stringify(name)} in a layer`);
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p === '..' || p.includes('\0')))
    throw new ImageError('UNSAFE_LAYER', `${what}: path ${JSON.stringify(name)} in a layer leaves the image`);
  return parts;
}

function kindOf(p: string): 'dir' | 'link' | 'other' | undefined {
  try {
    const st = lstatSync(p);
    return st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : 'other';
  } catch {
    return undefined;
  }
}

/** Sandbox root is one uid that owns nothing here: it gets the owner's bits; setuid/setgid go. */
const modeOf = (mode: number | undefined, fallback: number) => {
  const m = (mode ?? fallback) & 0o1777;
  return m | (((m >> 6) & 0o7) * 0o011);
};

/** Makes the parent directories of `parts` inside `root`, refusing to go through a symlink or a file. */
function parentsOf(root: string, parts: string[], what: string): string {
  let cur = root;
  for (const p of parts.slice(0, -1)) {
    cur = join(cur, p);
    const k = kindOf(cur);
    if (k === undefined) {
      mkdirSync(cur);
      chmodSync(cur, 0o755); // not left to the umask: the server's is 077, and sandboxes must read the root
    } else if (k !== 'dir')
      throw new ImageError(
        'UNSAFE_LAYER',
        `${what}: layer entry ${parts.join('/')} goes through ${k === 'link' ? 'the symlink' : 'the file'} ${cur.slice(root.length)}`,
      );
  }
  return cur;
}

function counter(max: number, what: string): Transform {
  let n = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      n += chunk.length;
      if (n > max) cb(new ImageError('TOO_LARGE', `${what}: a layer expands past ${max} bytes`));
      else cb(null, chunk);
    },
  });
}

/** True for gzip's magic number (layers may also be plain tar). */
export const isGzip = (head: Buffer) => head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;

export async function applyLayer(
  root: string,
  input: Readable,
  gzip: boolean,
  limits: LayerLimits,
  what: string,
): Promise<void> {
  const created = new Set<string>();
  const ex = extract();
  const feeding = pipeline(
    ...([input, ...(gzip ? [createGunzip()] : []), counter(limits.maxLayerBytes, what), ex] as unknown as [
      Readable,
      Transform,
    ]),
  );
  feeding.catch(() => undefined); // reported through the iterator below
  try {
    for await (const entry of ex) {
      const h = entry.header;
      const parts = entryPath(h.name, what);
      if (parts.length === 0) {
        entry.resume();
        continue;
      }
      const dir = parentsOf(root, parts, what);
      const base = parts[parts.length - 1];
      const rel = parts.join('/');
      const target = join(dir, base);
      if (base === OPAQUE) {
        const relDir = parts.slice(0, -1).join('/');
        for (const child of readdirSync(dir))
          if (!created.has(relDir ? `${relDir}/${child}` : child))
            rmSync(join(dir, child), { recursive: true, force: true });
        entry.resume();
        continue;
      }
      if (base.startsWith(WHITEOUT)) {
        rmSync(join(dir, base.slice(WHITEOUT.length)), { recursive: true, force: true });
        entry.resume();
        continue;
      }
      created.add(rel);
      const existing = kindOf(target);
      if (h.type === 'directory') {
        if (existing !== 'dir') {
          if (existing) rmSync(target, { recursive: true, force: true });
          mkdirSync(target);
        }
        chmodSync(target, modeOf(h.mode, 0o755));
        entry.resume();
        continue;
      }
      if (existing) rmSync(target, { recursive: true, force: true });
      if (h.type === 'file' || h.type === 'contiguous-file') {
        const fd = openSync(
          target,
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          0o600,
        );
        await pipeline(entry, createWriteStream('', { fd }));
        chmodSync(target, modeOf(h.mode, 0o644));
      } else if (h.type === 'symlink') {
        symlinkSync(h.linkname ?? '', target);
        entry.resume();
      } else if (h.type === 'link') {
        const from = entryPath(h.linkname ?? '', what);
        const src = join(parentsOf(root, from, what), from[from.length - 1] ?? '');
        if (from.length === 0 || kindOf(src) !== 'other')
          throw new ImageError(
            'UNSAFE_LAYER',
            `${what}: hard link ${rel} names ${h.linkname}, not a file of the image`,
          );
        linkSync(src, target);
        entry.resume();
      } else entry.resume(); // devices, FIFOs: never created from an image
    }
    await feeding;
  } catch (e) {
    input.destroy();
    if (e instanceof ImageError) throw e;
    throw new ImageError(
      'CORRUPT',
      `${what}: the layer is not a readable tar archive (${(e as Error).message})`,
    );
  }
}
