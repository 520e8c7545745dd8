// Applies one layer tarball onto an image root being built, refusing anything that could write or delete outside
// it: `..` or absolute names, a whiteout naming `..`, `.` or nothing, and any entry whose parent directory is a
// symlink or a file (a layer that plants `a -> /etc` and then writes `a/passwd`). One function, `beneath`, turns every
// name a layer gives (an entry, a whiteout's target, a hard link's source) into a host path. Whiteouts (`.wh.name`)
// delete from the layers below, opaque markers (`.wh..wh..opq`) empty a directory of what the layers below put there.
// Device nodes and FIFOs are skipped; setuid/setgid bits dropped; owners are not kept (one uid exists in a sandbox):
// every file is root's on disk, and a sandbox's root shows root's files as its own user's (decision 051), so the
// modes are kept as the image has them.
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
  closeSync,
  writeFileSync,
  constants,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import { ImageError } from './errors.js';
import { type Allowance, entryBytes } from './root-size.js';

/** Files up to this size are written in one call (read whole into an app's archive, app-archive.ts); larger ones are
 * streamed. */
export const WHOLE_FILE_BYTES = 1024 * 1024;

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';

export interface LayerLimits {
  /** Uncompressed bytes one layer may expand to (a decompression bomb stops here). */
  maxLayerBytes: number;
  /** What the image's root may still take (its workspace's image quota left), shared by all its layers. */
  allowance?: Allowance;
  /**
   * A plain archive, not a layer (a build's context, a tar a Dockerfile ADDs): `.wh.` names are files like any other,
   * nothing is deleted.
   */
  literal?: boolean;
}

/** The layer's relative path as parts, or an error for a name that could leave the root. */
function entryPath(name: string, what: string): string[] {
  if (name.startsWith('/'))
    throw new ImageError('UNSAFE_LAYER', `${what}: absolute path ${JSON.stringify(name)} in a layer`);
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  for (const p of parts) checkPart(p, name, what);
  return parts;
}

/** A part of a path beneath the root: a name in its directory, never `..`, `.`, empty, or holding `/` or NUL. */
function checkPart(part: string, name: string, what: string): void {
  if (part === '..' || part === '.' || part === '' || part.includes('/') || part.includes('\0'))
    throw new ImageError(
      'UNSAFE_LAYER',
      `${what}: path ${JSON.stringify(name)} in a layer leaves the image (${JSON.stringify(part)} is not a name in a directory)`,
    );
}

function kindOf(p: string): 'dir' | 'link' | 'other' | undefined {
  try {
    const st = lstatSync(p);
    return st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : 'other';
  } catch {
    return undefined;
  }
}

/** The image's mode without setuid/setgid (the sticky bit of /tmp-like directories stays). */
const modeOf = (mode: number | undefined, fallback: number) => (mode ?? fallback) & 0o1777;

/**
 * The host path of `parts` beneath `root`, what every write and removal of a layer goes through (Node has no
 * openat2 RESOLVE_BENEATH, and the root is private to this process while it is built, so a walk is enough): each part
 * is judged a plain name, each parent checked with lstat and refused when it is a symlink or a file. Missing parents
 * are made when `create`; otherwise there is nothing there and the answer is undefined.
 */
function beneath(
  root: string,
  parts: string[],
  name: string,
  what: string,
  create: boolean,
): string | undefined {
  if (parts.length === 0)
    throw new ImageError('UNSAFE_LAYER', `${what}: layer entry ${JSON.stringify(name)} names the root`);
  for (const p of parts) checkPart(p, name, what);
  let cur = root;
  for (const p of parts.slice(0, -1)) {
    cur = join(cur, p);
    const k = kindOf(cur);
    if (k === undefined) {
      if (!create) return undefined;
      mkdirSync(cur);
      chmodSync(cur, 0o755); // not left to the umask: the server's is 077, and sandboxes must read the root
    } else if (k !== 'dir')
      throw new ImageError(
        'UNSAFE_LAYER',
        `${what}: layer entry ${name} goes through ${k === 'link' ? 'the symlink' : 'the file'} ${cur.slice(root.length)}`,
      );
  }
  return join(cur, parts[parts.length - 1]);
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
      const base = parts[parts.length - 1];
      const rel = parts.join('/');
      if (base === OPAQUE && !limits.literal) {
        const dir = dirname(beneath(root, parts, h.name, what, true) as string);
        const relDir = parts.slice(0, -1).join('/');
        for (const child of readdirSync(dir))
          if (!created.has(relDir ? `${relDir}/${child}` : child))
            rmSync(join(dir, child), { recursive: true, force: true });
        entry.resume();
        continue;
      }
      if (base.startsWith(WHITEOUT) && !limits.literal) {
        // The name it deletes is judged like any other: `.wh...` would otherwise remove the root's parent.
        const gone = [...parts.slice(0, -1), base.slice(WHITEOUT.length)];
        const target = beneath(root, gone, h.name, what, false);
        if (target) rmSync(target, { recursive: true, force: true });
        entry.resume();
        continue;
      }
      const target = beneath(root, parts, h.name, what, true) as string;
      // Charged before anything is written: a layer past the workspace's allowance stops here.
      limits.allowance?.take(
        entryBytes(h.type === 'file' || h.type === 'contiguous-file' ? (h.size ?? 0) : 0),
      );
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
        if ((h.size ?? 0) <= WHOLE_FILE_BYTES) {
          // A small file in one write (most files of a layer or an app): a write stream per file cost more than its
          // bytes.
          try {
            const chunks: Buffer[] = [];
            for await (const c of entry) chunks.push(c as Buffer);
            writeFileSync(fd, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
          } finally {
            closeSync(fd);
          }
        } else await pipeline(entry, createWriteStream('', { fd }));
        chmodSync(target, modeOf(h.mode, 0o644));
      } else if (h.type === 'symlink') {
        symlinkSync(h.linkname ?? '', target);
        entry.resume();
      } else if (h.type === 'link') {
        const from = entryPath(h.linkname ?? '', what);
        const src = from.length ? beneath(root, from, h.linkname ?? '', what, false) : undefined;
        if (!src || kindOf(src) !== 'other')
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
