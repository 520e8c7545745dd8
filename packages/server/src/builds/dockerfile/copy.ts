// The layer of a COPY or ADD (decision 051), made on the host: the sources (from the context, another stage or an
// image, each resolved within its own root) copied to the destination as the stage's root resolves it (a destination
// under `/lib` of an image whose /lib is a link lands in usr/lib, as Docker does), the directories on the way created
// with the stage's own modes. ADD of a local tar (plain or gzip) unpacks it there with the image store's unpacker.
import {
  chmodSync,
  closeSync,
  copyFileSync,
  createReadStream,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { join, posix } from 'node:path';
import { applyLayer, isGzip } from '../../runtime/images/unpack.js';
import { ContextError, digestOf, matchSources, resolveIn } from './context.js';

/** Bytes a tar ADD may unpack to (the image quota checks the whole image after). */
const MAX_ADD_BYTES = 8 * 1024 ** 3;

/** Creates `path` (a real path of the stage's root `root`) in `layer`, each directory with the root's mode for it. */
export function mkdirLayerPath(root: string, layer: string, path: string): void {
  let rel = '';
  mkdirSync(layer, { recursive: true, mode: 0o755 });
  for (const part of path.split('/').filter(Boolean)) {
    rel = posix.join(rel, part);
    const at = join(layer, rel);
    if (lstatSync(at, { throwIfNoEntry: false })?.isDirectory()) continue;
    mkdirSync(at);
    const st = lstatSync(join(root, rel), { throwIfNoEntry: false });
    chmodSync(at, st?.isDirectory() ? st.mode & 0o7777 : 0o755);
  }
}

/** A digest of what the sources name in `root`, for the step's key. */
export async function copyInputs(
  root: string,
  sources: string[],
  what: string,
  label?: string,
): Promise<string> {
  const paths = sources.flatMap((s) => matchSources(root, s, what));
  return `${label ?? ''}${await digestOf(root, paths)}`;
}

function copyEntry(src: string, dest: string, chmod?: number): void {
  const st = lstatSync(src);
  if (st.isSymbolicLink()) {
    if (lstatSync(dest, { throwIfNoEntry: false })) return; // an earlier source of this step put it there
    symlinkSync(readlinkSync(src), dest);
  } else if (st.isDirectory()) {
    if (!lstatSync(dest, { throwIfNoEntry: false })?.isDirectory()) mkdirSync(dest);
    chmodSync(dest, chmod ?? st.mode & 0o7777);
    for (const n of readdirSync(src)) copyEntry(join(src, n), join(dest, n), chmod);
  } else if (st.isFile()) {
    copyFileSync(src, dest);
    chmodSync(dest, chmod ?? st.mode & 0o1777);
  } // devices, sockets, FIFOs: not copied into an image
}

type Archive = 'tar' | 'gzip' | 'other-compressed' | undefined;

function archiveKind(file: string): Archive {
  if (!statSync(file).isFile()) return undefined;
  const head = Buffer.alloc(262);
  const fd = openSync(file, 'r');
  let n: number;
  try {
    n = readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  if (isGzip(head.subarray(0, n))) return 'gzip';
  if (n >= 262 && head.subarray(257, 262).toString() === 'ustar') return 'tar';
  if (
    head.subarray(0, 3).toString() === 'BZh' ||
    head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0]))
  )
    return 'other-compressed';
  return undefined;
}

export async function copyLayer(p: {
  kind: 'COPY' | 'ADD';
  /** Where the sources are: the context, or another stage's or image's root. */
  srcRoot: string;
  sources: string[];
  /** Absolute in the image; a trailing `/` makes it a directory. */
  dest: string;
  chmod?: string;
  /** The stage's merged root (read only: where the destination resolves). */
  root: string;
  /** The empty directory the layer is made in. */
  layer: string;
  what: string;
}): Promise<void> {
  const mode = p.chmod === undefined ? undefined : Number.parseInt(p.chmod, 8);
  if (mode !== undefined && !(mode >= 0 && mode <= 0o7777))
    throw new ContextError(`${p.what}: --chmod=${p.chmod} is not an octal mode`);
  const matches = p.sources.flatMap((s) => matchSources(p.srcRoot, s, p.what));
  const destReal = resolveIn(p.root, p.dest.replace(/\/+$/, '') || '/');
  const destIsDir =
    p.dest.endsWith('/') ||
    lstatSync(join(p.root, destReal), { throwIfNoEntry: false })?.isDirectory() === true;
  if (matches.length > 1 && !destIsDir)
    throw new ContextError(`${p.what}: copying several files needs a destination directory ending with /`);
  mkdirLayerPath(p.root, p.layer, destIsDir ? destReal : posix.dirname(destReal));
  for (const m of matches) {
    const src = join(p.srcRoot, m);
    const st = lstatSync(src);
    if (p.kind === 'ADD' && !st.isDirectory()) {
      const kind = archiveKind(src);
      if (kind === 'other-compressed')
        throw new ContextError(`${p.what}: ADD unpacks tar and tar.gz archives only (${m} is bzip2 or xz)`);
      if (kind) {
        const at = join(p.layer, destIsDir ? destReal : posix.dirname(destReal));
        mkdirLayerPath(p.root, p.layer, destIsDir ? destReal : posix.dirname(destReal));
        await applyLayer(
          at,
          createReadStream(src),
          kind === 'gzip',
          { maxLayerBytes: MAX_ADD_BYTES, literal: true },
          p.what,
        );
        continue;
      }
    }
    if (st.isDirectory()) {
      const at = join(p.layer, destReal);
      mkdirLayerPath(p.root, p.layer, destReal);
      for (const n of readdirSync(src)) copyEntry(join(src, n), join(at, n), mode);
    } else {
      const target = destIsDir ? posix.join(destReal, posix.basename(m)) : destReal;
      copyEntry(src, join(p.layer, target), mode);
    }
  }
}
