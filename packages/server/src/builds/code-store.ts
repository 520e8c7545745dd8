// Uploaded sources, kept by content: `<dataDir>/builds/code/<sha256>.zip`. An upload streams to a temporary file
// while it is hashed and counted, then is renamed to its digest, so the same code uploaded twice is stored once
// and a revision names its source by digest.
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** Largest zip accepted (the service's CLI uploads sources, not images; vendored node_modules fit). */
export const MAX_UPLOAD_BYTES = 512 * 1024 * 1024;

export class UploadTooLargeError extends Error {
  override name = 'UploadTooLargeError';
}

export interface StoredCode {
  digest: string;
  size: number;
  /** The same bytes were stored before. */
  alreadyPresent: boolean;
}

export class CodeStore {
  readonly dir: string;
  constructor(dataDir: string) {
    this.dir = join(dataDir, 'builds', 'code');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  pathOf(digest: string): string {
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`not a source digest: ${digest}`);
    return join(this.dir, `${digest.slice('sha256:'.length)}.zip`);
  }

  has(digest: string): boolean {
    return existsSync(this.pathOf(digest));
  }

  async put(body: Readable, maxBytes = MAX_UPLOAD_BYTES): Promise<StoredCode> {
    const tmp = join(this.dir, `.upload-${randomBytes(8).toString('hex')}`);
    const hash = createHash('sha256');
    let size = 0;
    const count = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        if (size > maxBytes) return cb(new UploadTooLargeError(`the upload passes ${maxBytes} bytes`));
        hash.update(chunk);
        cb(null, chunk);
      },
    });
    try {
      await pipeline(body, count, createWriteStream(tmp, { mode: 0o600 }));
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    const digest = `sha256:${hash.digest('hex')}`;
    const path = this.pathOf(digest);
    const alreadyPresent = existsSync(path);
    if (alreadyPresent) await rm(tmp, { force: true });
    else await rename(tmp, path);
    return { digest, size, alreadyPresent };
  }
}
