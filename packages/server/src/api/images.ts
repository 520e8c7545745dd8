// /v0/images: the server's image store as a workspace sees it (docs/decisions/018-images.md, 037). List and get show
// the images the workspace holds by a name (pulled or imported by it, or pulled for its sandboxes), with its own
// names only; an id is found only among those. POST pulls from a registry, POST /images/import takes a `docker save`
// or OCI layout tar as the body; DELETE lets go of the workspace's name (409 while one of its sandboxes runs on the
// image). Image names hold slashes, so they are the path's tail.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { requireRole } from '../auth/require-role.js';
import { ApiError, invalid } from '../errors.js';
import { importArchive } from '../runtime/images/archive.js';
import { ImageError } from '../runtime/images/errors.js';
import type { HeldImage, ImageStore } from '../runtime/images/image-store.js';
import type { Resources } from '../store/resources.js';

export interface ImagesDeps {
  images: ImageStore;
  /** The workspace's sandboxes, to say which run on an image a delete is refused for. */
  resources?: Resources;
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
    case 'QUOTA_EXCEEDED':
      return new ApiError('QUOTA_EXCEEDED', e.message);
    case 'UNREACHABLE':
      return new ApiError('UNAVAILABLE', e.message, { code });
    default:
      return new ApiError('VALIDATION_FAILED', e.message, { code });
  }
}

function view(i: HeldImage, inUse: boolean) {
  return {
    id: i.id,
    references: i.references,
    digest: i.digest,
    size: i.size,
    unpackedSize: i.unpackedBytes,
    layers: i.layers.map((l) => ({ digest: l.digest, size: l.size })),
    config: i.config,
    inUse,
    createdAt: i.createdAt,
  };
}

export function register(v0: FastifyInstance, deps: ImagesDeps) {
  const { images } = deps;
  const viewIn = (workspace: string, i: HeldImage) => view(i, images.inUse(i, workspace));

  const nameOf = (req: FastifyRequest) =>
    decodeURIComponent((req.params as Record<string, string>)['*'] ?? '');
  function mustFind(workspace: string, name: string): HeldImage {
    let img: HeldImage | undefined;
    try {
      img = images.find(workspace, name);
    } catch (e) {
      throw imageApiError(e);
    }
    if (!img) throw new ApiError('NOT_FOUND', `image ${name} not found`);
    return img;
  }

  v0.get('/images', async (req) => {
    const a = requireRole(req, 'viewer');
    return images.heldBy(a.workspace).map((i) => viewIn(a.workspace, i));
  });

  v0.get('/images/*', async (req) => {
    const a = requireRole(req, 'viewer');
    return viewIn(a.workspace, mustFind(a.workspace, nameOf(req)));
  });

  v0.post('/images', async (req) => {
    const a = requireRole(req, 'member');
    const ref = (req.body as { reference?: unknown } | undefined)?.reference;
    if (typeof ref !== 'string' || !ref)
      throw invalid([
        { pointer: '/reference', message: 'an image reference to pull, e.g. python:3.12-slim' },
      ]);
    try {
      return viewIn(a.workspace, await images.pull(a.workspace, ref));
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
        const got = await importArchive(images, a.workspace, req.body as Readable, name);
        return got.map((i) => viewIn(a.workspace, i));
      } catch (e) {
        throw imageApiError(e);
      }
    });
  });

  /** The names of `workspace`'s sandboxes whose image is `img` (by a name of the workspace, or by id). */
  async function sandboxesOn(workspace: string, img: HeldImage): Promise<string[]> {
    if (!deps.resources) return [];
    const all = await deps.resources.store.list({ kind: 'Sandbox', workspace });
    return all
      .filter((o) => {
        const ref = o.body.spec?.runtime?.image;
        if (typeof ref !== 'string' || !ref || o.body.status === 'TERMINATED') return false;
        try {
          return ref === img.id || images.peek(workspace, ref)?.id === img.id;
        } catch {
          return false;
        }
      })
      .map((o) => o.name);
  }

  v0.delete('/images/*', async (req) => {
    const a = requireRole(req, 'member');
    const name = nameOf(req);
    const img = mustFind(a.workspace, name);
    try {
      return view(images.release(a.workspace, name), false);
    } catch (e) {
      if (e instanceof ImageError && e.code === 'IN_USE') {
        const users = await sandboxesOn(a.workspace, img);
        if (users.length)
          throw new ApiError(
            'CONFLICT',
            `image ${name} is in use by sandbox ${users.join(', ')}: delete ${users.length > 1 ? 'them' : 'it'} first`,
            { code: 'IMAGE_IN_USE' },
          );
      }
      throw imageApiError(e);
    }
  });
}
