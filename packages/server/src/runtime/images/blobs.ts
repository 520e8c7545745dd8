// Content-addressed blobs (`<store>/blobs/sha256/<hex>`): downloaded to a temporary name while the digest and
// the size are checked on the stream, renamed into place only when both match. A kill -9 mid-download leaves a
// `.partial-*` file that is never read and is swept at the next open; concurrent requests share one download.
import { createHash, randomBytes } from 'node:crypto';
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ImageReference } from '../../kinds/image-reference.js';
import { ImageError } from './errors.js';
import type { RegistryClient } from './registry.js';

const DIGEST = /^sha256:([a-f0-9]{64})$/;

export class BlobStore {
  readonly dir: string;
  private readonly inflight = new Map<string, Promise<string>>();

  constructor(storeDir: string) {
    this.dir = join(storeDir, 'blobs', 'sha256');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // Left by a process killed mid-download: never complete, never verified.
    for (const n of readdirSync(this.dir))
      if (n.includes('.partial-')) rmSync(join(this.dir, n), { force: true });
  }

  path(digest: string): string {
    const m = DIGEST.exec(digest);
    if (!m) throw new ImageError('UNSUPPORTED', `digest ${JSON.stringify(digest)} is not a sha256 digest`);
    return join(this.dir, m[1]);
  }

  has(digest: string): boolean {
    return existsSync(this.path(digest));
  }

  /** The blob's path, fetched from the registry unless already stored; `size` is the manifest's declared size. */
  fetch(
    client: RegistryClient,
    ref: ImageReference,
    digest: string,
    size: number,
    what: string,
  ): Promise<string> {
    const final = this.path(digest);
    if (existsSync(final)) return Promise.resolve(final);
    let p = this.inflight.get(digest);
    if (!p) {
      p = (async () => {
        const res = await client.get(ref, `blobs/${digest}`, ['*/*'], what);
        if (!res.body) throw new ImageError('CORRUPT', `${what}: blob ${digest} has no body`);
        return this.write(Readable.fromWeb(res.body as never), digest, size, what);
      })().finally(() => this.inflight.delete(digest));
      this.inflight.set(digest, p);
    }
    return p;
  }

  /** Stores a stream as `digest`, verifying it; `size` of -1 means unknown (an archive's own entry). */
  async write(input: Readable, digest: string, size: number, what: string): Promise<string> {
    const final = this.path(digest);
    const tmp = `${final}.partial-${randomBytes(6).toString('hex')}`;
    const hash = createHash('sha256');
    let n = 0;
    const check = new Transform({
      transform(chunk: Buffer, _e, cb) {
        n += chunk.length;
        if (size >= 0 && n > size)
          return cb(
            new ImageError('CORRUPT', `${what}: blob ${digest} is longer than its declared ${size} bytes`),
          );
        hash.update(chunk);
        cb(null, chunk);
      },
    });
    try {
      await pipeline(input, check, createWriteStream(tmp, { mode: 0o600 }));
      const got = `sha256:${hash.digest('hex')}`;
      if (got !== digest)
        throw new ImageError('CORRUPT', `${what}: blob ${digest} arrived with digest ${got}`);
      if (size >= 0 && n !== size)
        throw new ImageError('CORRUPT', `${what}: blob ${digest} is ${n} bytes, not ${size}`);
      renameSync(tmp, final);
      return final;
    } catch (e) {
      rmSync(tmp, { force: true });
      if (e instanceof ImageError) throw e;
      throw new ImageError(
        'UNREACHABLE',
        `${what}: download of ${digest} broke off (${(e as Error).message})`,
      );
    }
  }

  /** A stored blob's bytes (a peer copying an image reads them so: peer-images.ts). */
  stream(digest: string): Readable {
    return createReadStream(this.path(digest));
  }

  remove(digest: string): void {
    rmSync(this.path(digest), { force: true });
  }

  list(): string[] {
    return readdirSync(this.dir)
      .filter((n) => /^[a-f0-9]{64}$/.test(n))
      .map((n) => `sha256:${n}`);
  }
}
