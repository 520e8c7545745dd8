// An image made from a base image of the store plus one directory as an extra layer (what a build of agent or
// job code needs): the directory is packed with GNU tar, stored as a verified blob, and the new image installed
// under `name` with the base's config, `env` appended and `workingDir` replaced when given, for `workspace` only. The
// base is resolved in that workspace as a sandbox's image is (the default host-userland image has no layers to build
// on).
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { ImageError } from './errors.js';
import { type HeldImage, ImageStore } from './image-store.js';
import type { ImageConfig } from './manifest.js';

const run = promisify(execFile);

export interface DeriveOptions {
  /** `KEY=value` entries added after the base's Env (a later entry wins). */
  env?: string[];
  workingDir?: string;
}

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export function deriveImage(
  store: ImageStore,
  workspace: string,
  base: string,
  layerDir: string,
  name: string,
  opts: DeriveOptions = {},
): Promise<HeldImage> {
  return store.writing(() => derive(store, workspace, base, layerDir, name, opts));
}

async function derive(
  store: ImageStore,
  workspace: string,
  base: string,
  layerDir: string,
  name: string,
  opts: DeriveOptions,
): Promise<HeldImage> {
  const { canonical } = ImageStore.parse(name);
  const from = await store.resolve(workspace, base);
  const tmp = join(store.dir, 'tmp', `layer-${randomBytes(6).toString('hex')}.tar`);
  try {
    // Numeric owners and no absolute names: the unpacker refuses anything that leaves the root anyway.
    await run('tar', ['--numeric-owner', '--owner=0', '--group=0', '-C', layerDir, '-cf', tmp, '.']);
    const h = createHash('sha256');
    for await (const c of createReadStream(tmp)) h.update(c);
    const digest = `sha256:${h.digest('hex')}`;
    const size = statSync(tmp).size;
    if (!store.blobs.has(digest))
      await store.blobs.write(createReadStream(tmp), digest, size, `image ${canonical}`);
    const config: ImageConfig = {
      ...from.config,
      env: [...from.config.env, ...(opts.env ?? [])],
      ...(opts.workingDir ? { workingDir: opts.workingDir } : {}),
    };
    const cfgBytes = Buffer.from(
      JSON.stringify({
        os: 'linux',
        config: {
          Env: config.env,
          WorkingDir: config.workingDir,
          User: config.user,
          Entrypoint: config.entrypoint,
          Cmd: config.cmd,
        },
        rootfs: { type: 'layers', base: from.id, layers: [...from.layers.map((l) => l.digest), digest] },
      }),
    );
    const cfgDigest = sha(cfgBytes);
    if (!store.blobs.has(cfgDigest))
      await store.blobs.write(Readable.from([cfgBytes]), cfgDigest, cfgBytes.length, `image ${canonical}`);
    const layers = [...from.layers, { digest, size, mediaType: 'application/vnd.oci.image.layer.v1.tar' }];
    for (const l of from.layers)
      if (!store.blobs.has(l.digest))
        throw new ImageError(
          'CORRUPT',
          `image ${canonical}: a layer of the base ${base} is no longer in the store`,
        );
    const manifest = { config: { digest: cfgDigest, size: cfgBytes.length }, layers };
    return await store.install({
      canonical,
      digest: sha(Buffer.from(JSON.stringify({ schemaVersion: 2, ...manifest }))),
      manifest,
      config,
      layerFiles: layers.map((l) => store.blobs.path(l.digest)),
      size: layers.reduce((s, l) => s + l.size, 0),
      what: `image ${canonical}`,
      workspace,
    });
  } finally {
    rmSync(tmp, { force: true });
  }
}
