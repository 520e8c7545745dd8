// A built app's directory as one archive whose bytes depend on its files alone (docs/decisions/094-built-apps-across-
// nodes.md): entries sorted by name, modes reduced to 0755/0644 (what makeReadable leaves), no owners, no times. Its
// digest, taken once when the app is built, is the app's identity across the nodes of a cluster: a node that copies
// the app hashes the archive as it arrives and keeps it only when the digest is the one recorded at build time, so
// every node runs the bytes the builder made (a second build could differ: a dependency's new patch release).
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  createReadStream,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pack } from 'tar-stream';
import { ImageError } from '../runtime/images/errors.js';
import { applyLayer, WHOLE_FILE_BYTES } from '../runtime/images/unpack.js';

/** Bytes an app archive may expand to on a copy: far above any app (a decompression bomb from a bad peer stops). */
export const MAX_APP_BYTES = 8 * 1024 ** 3;
const EPOCH = new Date(0);

/** An entry of an app archive, as the packer walks it (sorted by name at each level). */
export interface AppEntry {
  name: string;
  type: 'directory' | 'file' | 'symlink';
  mode: number;
  size: number;
  linkname?: string;
}

/** The entries of `dir` in archive order: each directory before its children, names in byte order. */
export function appEntries(dir: string, prefix = ''): AppEntry[] {
  const out: AppEntry[] = [];
  const names = readdirSync(dir).sort((a, b) =>
    Buffer.compare(Buffer.from(a), Buffer.from(b)) < 0 ? -1 : 1,
  );
  for (const n of names) {
    const p = join(dir, n);
    const s = lstatSync(p);
    const name = prefix + n;
    if (s.isDirectory()) {
      out.push({ name: `${name}/`, type: 'directory', mode: 0o755, size: 0 });
      out.push(...appEntries(p, `${name}/`));
    } else if (s.isSymbolicLink())
      out.push({ name, type: 'symlink', mode: 0o777, size: 0, linkname: readlinkSync(p) });
    else if (s.isFile())
      out.push({ name, type: 'file', mode: (s.mode & 0o111) !== 0 ? 0o755 : 0o644, size: s.size });
    // Sockets, FIFOs, devices: never part of an app (a build step cannot make them readable to replicas).
  }
  return out;
}

/** The archive of the app directory `dir` (a tar stream; the same files give the same bytes). */
export function packApp(dir: string): Readable {
  const p = pack();
  const entries = appEntries(dir);
  void (async () => {
    try {
      for (const e of entries) {
        const header = {
          name: e.name,
          type: e.type,
          mode: e.mode,
          size: e.size,
          mtime: EPOCH,
          uid: 0,
          gid: 0,
          uname: '',
          gname: '',
          ...(e.linkname !== undefined ? { linkname: e.linkname } : {}),
        };
        await new Promise<void>((resolve, reject) => {
          const done = (err?: Error | null) => (err ? reject(err) : resolve());
          if (e.type !== 'file') return void p.entry(header, done);
          // A small file whole (most of a node_modules): a read stream per file cost more than its bytes.
          if (e.size <= WHOLE_FILE_BYTES) return void p.entry(header, readFileSync(join(dir, e.name)), done);
          const file = createReadStream(join(dir, e.name));
          file.on('error', reject);
          file.pipe(p.entry(header, done));
        });
      }
      p.finalize();
    } catch (err) {
      p.destroy(err as Error);
    }
  })();
  // tar-stream's streams are streamx's: a Node stream of them for pipeline and Fastify.
  return Readable.from(p as AsyncIterable<Buffer>, { objectMode: false });
}

/** A stream's bytes hashed (sha256) and counted on their way through. */
export function hashing(): Transform & { digest: () => string; bytes: () => number } {
  const hash = createHash('sha256');
  let n = 0;
  const t = new Transform({
    transform(chunk: Buffer, _e, cb) {
      hash.update(chunk);
      n += chunk.length;
      cb(null, chunk);
    },
  });
  let done: string | undefined;
  return Object.assign(t, {
    digest: () => {
      done ??= `sha256:${hash.digest('hex')}`;
      return done;
    },
    bytes: () => n,
  });
}

/** The digest (`sha256:<hex>`) and size of the app directory's archive. */
export async function appArchiveDigest(dir: string): Promise<{ digest: string; size: number }> {
  const h = hashing();
  await pipeline(packApp(dir), h, async (src: AsyncIterable<unknown>) => {
    for await (const _ of src);
  });
  return { digest: h.digest(), size: h.bytes() };
}

/** A copy of an app whose bytes are not the ones recorded at its build (or that could not be read whole). */
export class AppCopyError extends Error {
  override name = 'AppCopyError';
}

/**
 * Unpacks an app archive arriving on `input` as the directory `dest`, only if its bytes hash to `digest`: it is
 * written beside `dest` under a temporary name (names that would leave it refused, as for an image layer) and renamed
 * into place whole once the digest matched; anything else leaves nothing. Returns the archive's size.
 */
export async function unpackApp(
  input: Readable,
  dest: string,
  digest: string,
  what: string,
): Promise<number> {
  const tmp = `${dest}.partial-${randomBytes(6).toString('hex')}`;
  const h = hashing();
  mkdirSync(tmp);
  chmodSync(tmp, 0o755);
  try {
    const hashed = input.pipe(h);
    input.on('error', (err) => h.destroy(err));
    try {
      await applyLayer(tmp, hashed, false, { maxLayerBytes: MAX_APP_BYTES, literal: true }, what);
    } catch (err) {
      if (err instanceof ImageError) throw new AppCopyError(err.message);
      throw err;
    }
    const got = h.digest();
    if (got !== digest)
      throw new AppCopyError(`${what}: the archive arrived with digest ${got}, not ${digest}`);
    rmSync(dest, { recursive: true, force: true });
    renameSync(tmp, dest);
    return h.bytes();
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
