// An image of the store made from a base image and layer directories as overlayfs keeps them (a snapshot's layers,
// decision 053): each directory packed as an OCI layer (whiteouts and opaque directories as OCI writes them,
// layer-pack.ts), stacked over the base's, installed under `name` for `workspace` with the base's config. Charged to
// the workspace's image quota like any other image.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ImageError } from './errors.js';
import { type HeldImage, ImageStore } from './image-store.js';
import { packLayer } from './layer-pack.js';
import { hostArchitecture, ociConfigBytes } from './manifest.js';

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** `layers` bottom first (the order they were written in). */
export async function imageFromLayers(
  store: ImageStore,
  workspace: string,
  base: string,
  layers: string[],
  name: string,
  createdBy: string,
): Promise<HeldImage> {
  const { canonical } = ImageStore.parse(name);
  const what = `image ${canonical}`;
  const from = await store.resolve(workspace, base);
  const cfgPath = store.blobs.path(from.id);
  const cfg = existsSync(cfgPath) ? JSON.parse(readFileSync(cfgPath, 'utf8')) : undefined;
  const baseDiffs: string[] = Array.isArray(cfg?.rootfs?.diff_ids) ? cfg.rootfs.diff_ids : [];
  if (baseDiffs.length !== from.layers.length)
    throw new ImageError('CORRUPT', `${what}: the base ${base} does not list its layers (diff_ids)`);
  const tmp = join(store.dir, 'tmp', `snapshot-${randomBytes(6).toString('hex')}`);
  mkdirSync(tmp, { recursive: true });
  try {
    return await store.writing(async () => {
      const packed = [];
      for (const dir of layers) packed.push(await packLayer(dir, store.blobs, tmp, what));
      const descriptors = [
        ...from.layers,
        ...packed.map((p) => ({ mediaType: p.mediaType, digest: p.digest, size: p.size })),
      ];
      const history = [
        ...(Array.isArray(cfg.history) ? cfg.history : []),
        ...packed.map(() => ({ created_by: createdBy })),
      ];
      const cfgBytes = ociConfigBytes(
        from.config,
        hostArchitecture(),
        [...baseDiffs, ...packed.map((p) => p.diffId)],
        history,
      );
      const cfgDigest = sha(cfgBytes);
      if (!store.blobs.has(cfgDigest))
        await store.blobs.write(Readable.from([cfgBytes]), cfgDigest, cfgBytes.length, what);
      for (const l of from.layers)
        if (!store.blobs.has(l.digest))
          throw new ImageError('CORRUPT', `${what}: a layer of the base ${base} is no longer in the store`);
      const manifest = {
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: {
          mediaType: 'application/vnd.oci.image.config.v1+json',
          digest: cfgDigest,
          size: cfgBytes.length,
        },
        layers: descriptors,
      };
      const mBytes = Buffer.from(JSON.stringify(manifest));
      const mDigest = sha(mBytes);
      if (!store.blobs.has(mDigest))
        await store.blobs.write(Readable.from([mBytes]), mDigest, mBytes.length, what);
      return store.install({
        workspace,
        canonical,
        digest: mDigest,
        manifest,
        config: from.config,
        layerFiles: descriptors.map((l) => store.blobs.path(l.digest)),
        size: descriptors.reduce((n, l) => n + l.size, 0),
        what,
      });
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
