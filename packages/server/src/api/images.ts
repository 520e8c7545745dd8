// /v0/images: the server's image store as a workspace sees it (docs/decisions/018-images.md). List and get show
// the images the workspace pulled or imported by name and those its sandboxes run on; POST pulls from a
// registry, POST /images/import takes a `docker save` or OCI layout tar as the body; DELETE lets go of the
// workspace's name (409 while a sandbox runs on the image). Image names hold slashes, so they are the path's tail.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { requireRole } from '../auth/require-role.js';
import { ApiError, invalid } from '../errors.js';
import { importArchive } from '../runtime/images/archive.js';
import { ImageError } from '../runtime/images/errors.js';
import type { ImageStore, StoredImage } from '../runtime/images/image-store.js';
import type { Resources } from '../store/resources.js';

export interface ImagesDeps {
  resources: Resources;
  images: ImageStore;
  /** True while a sandbox runs on this image root. */
  inUse(rootfs: string): boolean;
}

/** ImageError → the wire: the registry's refusal is not the caller's authentication failing (no 401). */
export function imageApiError(e: unknown): unknown {
  if (!(e instanceof ImageError)) return e;
  const code = `IMAGE_${e.code}`;
  switch (e.code) {
    case 'INVALID_REFERENCE':
      return invalid([{ pointer: '/reference', message: e.message }]);
    case 'REFUSED':
      return new ApiError('VALIDATION_FAILED', e.message, {
        code,
        errors: [{ pointer: '/reference', message: e.message }],
      });
    case 'NOT_FOUND':
      return new ApiError('NOT_FOUND', e.message, { code });
    case 'IN_USE':
      return new ApiError('CONFLICT', e.message, { code });
    case 'TOO_LARGE':
      return new ApiError('PAYLOAD_TOO_LARGE', e.message, { code });
    case 'UNREACHABLE':
      return new ApiError('UNAVAILABLE', e.message, { code });
    default:
      return new ApiError('VALIDATION_FAILED', e.message, { code });
  }
}

function view(i: StoredImage, inUse: boolean) {
  return {
    id: i.id,
    references: i.references,
    digest: i.digest,
    size: i.size,
    layers: i.layers.map((l) => ({ digest: l.digest, size: l.size })),
    config: i.config,
    inUse,
    createdAt: i.createdAt,
  };
}

export function register(v0: FastifyInstance, deps: ImagesDeps) {
  const { images, inUse } = deps;

  /** Held by name, or run by one of the workspace's sandboxes. */
  async function visible(workspace: string): Promise<StoredImage[]> {
    const out = new Map(images.heldBy(workspace).map((i) => [i.id, i]));
    for (const o of await deps.resources.store.list({ kind: 'Sandbox', workspace })) {
      const name = o.body.spec?.runtime?.image;
      if (!name) continue;
      try {
        const i = images.find(name);
        if (i) out.set(i.id, i);
      } catch {
        // a malformed name never got stored
      }
    }
    return [...out.values()].sort((a, b) => (a.references[0] ?? '').localeCompare(b.references[0] ?? ''));
  }

  const nameOf = (req: FastifyRequest) =>
    decodeURIComponent((req.params as Record<string, string>)['*'] ?? '');
  async function mustSee(workspace: string, name: string): Promise<StoredImage> {
    let img: StoredImage | undefined;
    try {
      img = images.find(name);
    } catch (e) {
      throw imageApiError(e);
    }
    if (!img || !(await visible(workspace)).some((i) => i.id === img.id))
      throw new ApiError('NOT_FOUND', `image ${name} not found`);
    return img;
  }

  v0.get('/images', async (req) => {
    const a = requireRole(req, 'viewer');
    return (await visible(a.workspace)).map((i) => view(i, inUse(i.rootfs)));
  });

  v0.get('/images/*', async (req) => {
    const a = requireRole(req, 'viewer');
    const img = await mustSee(a.workspace, nameOf(req));
    return view(img, inUse(img.rootfs));
  });

  v0.post('/images', async (req) => {
    const a = requireRole(req, 'member');
    const ref = (req.body as { reference?: unknown } | undefined)?.reference;
    if (typeof ref !== 'string' || !ref)
      throw invalid([
        { pointer: '/reference', message: 'an image reference to pull, e.g. python:3.12-slim' },
      ]);
    try {
      const img = await images.pull(ref, a.workspace);
      return view(img, inUse(img.rootfs));
    } catch (e) {
      throw imageApiError(e);
    }
  });

  v0.register(async (s) => {
    // The archive streams to the importer as it arrives: never buffered whole, capped there.
    s.addContentTypeParser(['application/x-tar', 'application/octet-stream'], (_req, payload, done) =>
      done(null, payload),
    );
    s.post('/images/import', async (req) => {
      const a = requireRole(req, 'member');
      const name = (req.query as Record<string, string | undefined>).name || undefined;
      if (!req.body || typeof (req.body as Readable).pipe !== 'function')
        throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'send the archive as application/x-tar');
      try {
        const got = await importArchive(images, req.body as Readable, name, a.workspace);
        return got.map((i) => view(i, inUse(i.rootfs)));
      } catch (e) {
        throw imageApiError(e);
      }
    });
  });

  v0.delete('/images/*', async (req) => {
    const a = requireRole(req, 'member');
    const name = nameOf(req);
    await mustSee(a.workspace, name);
    try {
      const img = images.release(name, a.workspace, inUse);
      return view(img, false);
    } catch (e) {
      throw imageApiError(e);
    }
  });
}
