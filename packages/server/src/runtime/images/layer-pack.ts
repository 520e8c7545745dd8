// A layer directory as overlayfs keeps one (a sandbox's changes, linux/changes.ts; or files a build copied) packed into
// an OCI layer blob of the store (decision 051): whiteouts (0/0 character devices) become `.wh.<name>` files, an opaque
// directory (trusted.overlay.opaque=y) gets a `.wh..wh..opq` marker, owners become root's, other devices and FIFOs are
// left out. GNU tar reads the directory (it alone reads the opaque attribute), sorted by name: packing the same
// directory again gives the same bytes, gzip without a time in its header the same blob, so a layer kept by a build
// cache is packed again to the same digest when the store has dropped its blob.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { extract, type Header, pack } from 'tar-stream';
import type { BlobStore } from './blobs.js';
import { ImageError } from './errors.js';

export interface PackedLayer {
  /** The compressed blob's digest (what a manifest names). */
  digest: string;
  size: number;
  /** The uncompressed tar's digest (what the image config's rootfs.diff_ids names). */
  diffId: string;
  mediaType: string;
}

export const LAYER_MEDIA_TYPE = 'application/vnd.oci.image.layer.v1.tar+gzip';
const OPAQUE_XATTR = 'SCHILY.xattr.trusted.overlay.opaque';

function hashing(hash: ReturnType<typeof createHash>, count?: { n: number }): Transform {
  return new Transform({
    transform(chunk: Buffer, _e, cb) {
      hash.update(chunk);
      if (count) count.n += chunk.length;
      cb(null, chunk);
    },
  });
}

/** The entries of GNU tar's archive of `dir`, as an OCI layer. */
function convert(gnu: NodeJS.ReadableStream) {
  const ex = extract();
  const out = pack();
  void (async () => {
    try {
      for await (const entry of ex) {
        const h = entry.header;
        const name = h.name.replace(/^\.\//, '').replace(/\/$/, '');
        const base: Partial<Header> & { name: string } = {
          name,
          mode: h.mode,
          mtime: h.mtime,
          uid: 0,
          gid: 0,
          uname: '',
          gname: '',
        };
        const add = (header: Partial<Header> & { name: string }, body?: Buffer) =>
          new Promise<void>((resolve, reject) =>
            out.entry(header, body ?? '', (e) => (e ? reject(e) : resolve())),
          );
        if (!name || name === '.') {
          entry.resume();
          continue;
        }
        const slash = name.lastIndexOf('/');
        const dir = slash >= 0 ? name.slice(0, slash + 1) : '';
        const leaf = name.slice(slash + 1);
        if (h.type === 'character-device' && !h.devmajor && !h.devminor) {
          await add({ ...base, name: `${dir}.wh.${leaf}`, type: 'file', size: 0, mode: 0o644 });
          entry.resume();
        } else if (h.type === 'directory') {
          await add({ ...base, type: 'directory' });
          if ((h.pax as Record<string, string> | undefined)?.[OPAQUE_XATTR] === 'y')
            await add({ ...base, name: `${name}/.wh..wh..opq`, type: 'file', size: 0, mode: 0o644 });
          entry.resume();
        } else if (h.type === 'file' || h.type === 'contiguous-file') {
          await new Promise<void>((resolve, reject) => {
            const body = out.entry({ ...base, type: 'file', size: h.size }, (e) =>
              e ? reject(e) : resolve(),
            );
            entry.on('error', reject);
            entry.pipe(body);
          });
        } else if (h.type === 'symlink') {
          await add({ ...base, type: 'symlink', linkname: h.linkname });
          entry.resume();
        } else if (h.type === 'link') {
          await add({ ...base, type: 'link', linkname: (h.linkname ?? '').replace(/^\.\//, '') });
          entry.resume();
        } else entry.resume(); // other devices, FIFOs: never part of an image
      }
      out.finalize();
    } catch (e) {
      out.destroy(e as Error);
    }
  })();
  gnu.pipe(ex);
  return out;
}

/** Packs `dir` into the store's blobs; returns the layer's descriptor and diff id. */
export async function packLayer(
  dir: string,
  blobs: BlobStore,
  tmpDir: string,
  what: string,
): Promise<PackedLayer> {
  const tmp = join(tmpDir, `layer-${randomBytes(6).toString('hex')}.tar.gz`);
  const tar = spawn(
    'tar',
    [
      '-C',
      dir,
      '--xattrs',
      '--xattrs-include=trusted.overlay.opaque',
      '--numeric-owner',
      '--sort=name',
      '-cf',
      '-',
      '.',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  tar.stderr.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
  const diff = createHash('sha256');
  const blob = createHash('sha256');
  const size = { n: 0 };
  try {
    await pipeline(
      convert(tar.stdout),
      hashing(diff),
      createGzip({ level: 6 }),
      hashing(blob, size),
      createWriteStream(tmp, { mode: 0o600 }),
    );
    if ((await exited) !== 0)
      throw new ImageError('CORRUPT', `${what}: packing the layer failed: ${err.trim()}`);
    const digest = `sha256:${blob.digest('hex')}`;
    if (!blobs.has(digest)) await blobs.write(createReadStream(tmp), digest, statSync(tmp).size, what);
    return { digest, size: size.n, diffId: `sha256:${diff.digest('hex')}`, mediaType: LAYER_MEDIA_TYPE };
  } finally {
    tar.kill();
    rmSync(tmp, { force: true });
  }
}
