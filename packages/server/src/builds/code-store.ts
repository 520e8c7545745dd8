// Uploaded sources, kept by content within their workspace: `<dataDir>/builds/workspaces/<ws>/code/<sha256>.zip`
// (layout.ts). An upload streams to a temporary file while it is hashed and counted, then is renamed to its digest,
// so the same code uploaded twice to a workspace is stored once and a revision names its source by digest. Two
// workspaces uploading the same bytes each keep their own copy: a digest is only ever looked up in the workspace
// that stored it, and a deleted workspace takes its sources with it (decision 036).
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { workspaceBuildsDir } from './layout.js';

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
  constructor(private readonly dataDir: string) {}

  /** The directory of a workspace's sources. */
  dirOf(workspace: string): string {
    return join(workspaceBuildsDir(this.dataDir, workspace), 'code');
  }

  pathOf(workspace: string, digest: string): string {
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`not a source digest: ${digest}`);
    return join(this.dirOf(workspace), `${digest.slice('sha256:'.length)}.zip`);
  }

  has(workspace: string, digest: string): boolean {
    return existsSync(this.pathOf(workspace, digest));
  }

  async put(workspace: string, body: Readable, maxBytes = MAX_UPLOAD_BYTES): Promise<StoredCode> {
    const dir = this.dirOf(workspace);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = join(dir, `.upload-${randomBytes(8).toString('hex')}`);
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
    const path = this.pathOf(workspace, digest);
    const alreadyPresent = existsSync(path);
    if (alreadyPresent) await rm(tmp, { force: true });
    else await rename(tmp, path);
    return { digest, size, alreadyPresent };
  }
}
