// Multipart uploads of large files (the SDK sends files above 5 MB as 5 MB parts, 3 at a time): parts are kept
// as files in a private temp directory and assembled in order on complete.
import { createReadStream, createWriteStream, rmSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';

/** An upload neither completed nor aborted is forgotten (and its parts deleted) after this long. */
/** node:crypto costs every sandbox's daemon ~0.4 MB when loaded at start; only uploads need it. */
const crypto = () => import('node:crypto');

export const UPLOAD_TTL_MS = 24 * 60 * 60 * 1000;
/** Part numbers allowed, as in S3's multipart upload, which the SDK's protocol mirrors. */
export const MAX_PART_NUMBER = 10_000;

export interface UploadedPart {
  partNumber: number;
  etag: string;
  size: number;
  uploadedAt: string;
}

export interface Upload {
  uploadId: string;
  path: string;
  permissions: number;
  initiatedAt: Date;
  dir: string;
  parts: Map<number, UploadedPart>;
}

export class UploadStore {
  private uploads = new Map<string, Upload>();

  constructor(private readonly baseDir = join(tmpdir(), `berth-multipart-${process.pid}`)) {}

  async initiate(path: string, permissions: number): Promise<Upload> {
    await this.sweep();
    const uploadId = (await crypto()).randomUUID();
    const dir = join(this.baseDir, uploadId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const upload: Upload = { uploadId, path, permissions, initiatedAt: new Date(), dir, parts: new Map() };
    this.uploads.set(uploadId, upload);
    return upload;
  }

  get(uploadId: string): Upload | undefined {
    return this.uploads.get(uploadId);
  }

  list(): Upload[] {
    return [...this.uploads.values()];
  }

  partFile(upload: Upload, partNumber: number): string {
    return join(upload.dir, `part-${partNumber}`);
  }

  /** Records a part whose bytes are already in partFile(); its etag is the MD5 of those bytes (as S3's is). */
  async recordPart(upload: Upload, partNumber: number, size: number): Promise<UploadedPart> {
    const etag = (await crypto())
      .createHash('md5')
      .update(await readFile(this.partFile(upload, partNumber)))
      .digest('hex');
    const part = { partNumber, etag, size, uploadedAt: new Date().toISOString() };
    upload.parts.set(partNumber, part);
    return part;
  }

  /** Concatenates `order` (part numbers) into the target, atomically replacing it, then forgets the upload. */
  async complete(upload: Upload, order: number[]): Promise<void> {
    await mkdir(dirname(upload.path), { recursive: true, mode: 0o755 });
    const staging = `${upload.path}.upload-${upload.uploadId}`;
    try {
      const out = createWriteStream(staging, { mode: upload.permissions });
      for (const n of order) await pipeline(createReadStream(this.partFile(upload, n)), out, { end: false });
      await new Promise<void>((resolve, reject) =>
        out.end((err?: Error | null) => (err ? reject(err) : resolve())),
      );
      await chmod(staging, upload.permissions);
      await rename(staging, upload.path);
    } catch (err) {
      await rm(staging, { force: true });
      throw err;
    }
    await this.abort(upload);
  }

  async abort(upload: Upload): Promise<void> {
    this.uploads.delete(upload.uploadId);
    await rm(upload.dir, { recursive: true, force: true });
  }

  /** At daemon exit: nothing of an unfinished upload outlives the daemon. */
  disposeSync(): void {
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  private async sweep(): Promise<void> {
    const cutoff = Date.now() - UPLOAD_TTL_MS;
    for (const u of this.uploads.values()) if (u.initiatedAt.getTime() < cutoff) await this.abort(u);
  }
}
