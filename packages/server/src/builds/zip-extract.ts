// Unpacks an uploaded source zip into a staging directory, refusing what would escape it: entries with `..`
// segments, absolute or drive paths, symbolic links (a link is refused outright: a source tree needs none, and
// a link resolved later by the build could reach anywhere), and archives past the size and entry caps.
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';

/** Unpacked bytes an upload may grow into: a source tree with vendored node_modules fits, a zip bomb does not. */
export const MAX_UNPACKED_BYTES = 1024 * 1024 * 1024;
/** Entries an upload may hold; node_modules trees run to tens of thousands of files. */
export const MAX_ENTRIES = 200_000;

/** The archive breaks a rule: the upload is refused (400) with this message. */
export class UnsafeArchiveError extends Error {
  override name = 'UnsafeArchiveError';
}

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

/** The entry's relative path inside the root, or a reason to refuse it. */
export function entryPath(name: string): { ok: true; path: string } | { ok: false; reason: string } {
  if (name.includes('\0')) return { ok: false, reason: `entry ${JSON.stringify(name)} holds a NUL byte` };
  const slashed = name.replace(/\\/g, '/');
  if (slashed.startsWith('/') || /^[a-zA-Z]:/.test(slashed))
    return { ok: false, reason: `entry ${JSON.stringify(name)} is an absolute path` };
  if (slashed.split('/').includes('..'))
    return { ok: false, reason: `entry ${JSON.stringify(name)} climbs out of the archive (..)` };
  const norm = posix.normalize(slashed);
  if (norm === '.' || norm === './') return { ok: true, path: '' };
  return { ok: true, path: norm };
}

/**
 * Extracts `zipFile` into `dest` (created); throws UnsafeArchiveError for a refused archive. Without `dest` it
 * only checks every entry (the upload route refuses a bad archive before anything builds it).
 */
export function extractZip(zipFile: string, dest?: string): Promise<{ files: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    yauzl.open(zipFile, { lazyEntries: true, strictFileNames: false }, (err, zip) => {
      if (err || !zip) return reject(new UnsafeArchiveError(`not a zip archive: ${err?.message}`));
      let files = 0;
      let bytes = 0;
      let entries = 0;
      const fail = (e: Error) => {
        zip.close();
        reject(e);
      };
      zip.on('error', (e: Error) => fail(new UnsafeArchiveError(`corrupt zip archive: ${e.message}`)));
      zip.on('end', () => resolve({ files, bytes }));
      zip.on('entry', (entry: yauzl.Entry) => {
        if (++entries > MAX_ENTRIES) return fail(new UnsafeArchiveError(`more than ${MAX_ENTRIES} entries`));
        const p = entryPath(entry.fileName);
        if (!p.ok) return fail(new UnsafeArchiveError(p.reason));
        const mode = (entry.externalFileAttributes >>> 16) & 0xffff;
        if ((mode & S_IFMT) === S_IFLNK)
          return fail(new UnsafeArchiveError(`entry ${JSON.stringify(entry.fileName)} is a symbolic link`));
        if (dest === undefined) {
          bytes += entry.uncompressedSize;
          if (bytes > MAX_UNPACKED_BYTES)
            return fail(new UnsafeArchiveError(`unpacks to more than ${MAX_UNPACKED_BYTES} bytes`));
          if (!entry.fileName.endsWith('/')) files++;
          return zip.readEntry();
        }
        const target = join(dest, p.path);
        if (entry.fileName.endsWith('/') || p.path === '') {
          mkdir(target, { recursive: true }).then(() => zip.readEntry(), fail);
          return;
        }
        bytes += entry.uncompressedSize;
        if (bytes > MAX_UNPACKED_BYTES)
          return fail(new UnsafeArchiveError(`unpacks to more than ${MAX_UNPACKED_BYTES} bytes`));
        zip.openReadStream(entry, (e, stream) => {
          if (e || !stream) return fail(new UnsafeArchiveError(`corrupt entry ${entry.fileName}`));
          // Executable bits survive (scripts in node_modules/.bin); nothing else of the archive's mode does.
          const exec = (mode & 0o111) !== 0;
          mkdir(dirname(target), { recursive: true })
            .then(() =>
              pipeline(stream, createWriteStream(target, { mode: exec ? 0o755 : 0o644, flags: 'wx' })),
            )
            .then(() => {
              files++;
              zip.readEntry();
            }, fail);
        });
      });
      zip.readEntry();
    });
  });
}
