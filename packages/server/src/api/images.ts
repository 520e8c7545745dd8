// /v0/images: the server's image store as a workspace sees it (docs/decisions/018-images.md, 037, 051). List and get
// show the images the workspace holds by a name (pulled, imported, built or accepted from a share by it, or pulled for
// its sandboxes), with its own names only; an id is found only among those. POST pulls from a registry, POST
// /images/import takes a `docker save` or OCI layout tar as the body; DELETE lets go of the workspace's name (409 while
// one of its sandboxes runs on the image), DELETE …/tags/{tag} of one tag, DELETE /images of every name nothing of
// the workspace names. Image names hold slashes, so they are the path's tail; the service's
// `{resourceType}/{imageName}` is the same name in two parts (image-view.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { requireRole } from '../auth/require-role.js';
import { ApiError, invalid } from '../errors.js';
import { canonicalReference, parseImageReference } from '../kinds/image-reference.js';
import type { Store } from '../store/store.js';
import { builtImageName } from '../builds/dockerfile/workload.js';
import { importArchive } from '../runtime/images/archive.js';
import { ImageError } from '../runtime/images/errors.js';
import { type HeldImage, ImageStore } from '../runtime/images/image-store.js';
import type { Resources } from '../store/resources.js';
import { imageView } from './image-view.js';

export interface ImagesDeps {
  images: ImageStore;
  /** The image names the workspace's sandboxes, agents, functions and jobs name (a cleanup keeps them), canonical. */
  referenced: (workspace: string) => Promise<Set<string>>;
  /** Drops the workspace's Dockerfile layer cache; how many layers went. */
  clearBuildCache: (workspace: string) => number;
  /** The workspace's sandboxes, to say which run on an image a delete is refused for. */
  resources?: Resources;
  /**
   * In a cluster: waits (bounded) until another node holds the images a write made, and says how many nodes hold
   * them (decision 087); the answer carries it as `x-berth-image-copies`.
   */
  secondCopy?: SecondCopy;
  /**
   * In a cluster: waits (bounded) until no other node holds the names a delete let go of, and says how many still do
   * (decision 087); the answer carries it as `x-berth-image-copies`.
   */
  letGo?: SecondCopy;
}

/**
 * How many nodes hold what `refs` (image ids, and the names the write bound) stand for in the workspace once another
 * node has them all or the wait ran out (see ImagesDeps). Names count: a name bound to an image the other nodes
 * already held is lost with the leader until they bind it too.
 */
export type SecondCopy = (workspace: string, refs: string[]) => Promise<number | undefined>;

export const IMAGE_COPIES_HEADER = 'x-berth-image-copies';

/** Waits for the images' second copy where there is a cluster, and says how many nodes hold them. */
export async function copiesOf(
  reply: FastifyReply,
  secondCopy: SecondCopy | undefined,
  workspace: string,
  refs: string[],
) {
  const n = secondCopy && refs.length ? await secondCopy(workspace, refs) : undefined;
  if (n !== undefined) reply.header(IMAGE_COPIES_HEADER, String(n));
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
    case 'CONFLICT':
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

/** The canonical image names a workspace's sandboxes, agents, functions and jobs name, and their revisions' images. */
export async function referencedImages(store: Store, workspace: string): Promise<Set<string>> {
  const out = new Set<string>();
  const add = (name: unknown) => {
    const p = typeof name === 'string' && name ? parseImageReference(name) : undefined;
    if (p?.ok) out.add(canonicalReference(p.ref));
  };
  for (const kind of ['Sandbox', 'Agent', 'Function', 'Job'])
    for (const o of await store.list({ kind, workspace })) {
      add(o.body.spec?.runtime?.image);
      // The images Dockerfile builds made for the workload's revisions (a rollback runs one again).
      for (const r of o.body.revisions ?? []) if (typeof r?.app === 'string') add(builtImageName(r.app));
    }
  return out;
}

export function register(v0: FastifyInstance, deps: ImagesDeps) {
  const { images } = deps;
  const viewIn = (workspace: string, i: HeldImage) => imageView(images, workspace, i);
  const guard = <T>(fn: () => T): T => {
    try {
      return fn();
    } catch (e) {
      throw imageApiError(e);
    }
  };

  /** The name a request addresses: the wildcard's tail, or the service's `{resourceType}/{imageName}`. */
  const nameOf = (req: FastifyRequest) => {
    const p = req.params as Record<string, string>;
    return p.resourceType !== undefined
      ? `${p.resourceType}/${p.imageName}`
      : decodeURIComponent(p['*'] ?? '');
  };

  /** The image a name stands for in the workspace: a tagless name is `:latest`, else the repository's newest tag. */
  function mustFind(workspace: string, name: string): HeldImage {
    const img = guard(() => {
      const direct = images.find(workspace, name);
      if (direct) return direct;
      const tagged = images
        .namesFor(workspace, name)
        .map((n) => images.find(workspace, n))
        .filter((i): i is HeldImage => !!i)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
      return tagged.at(-1);
    });
    if (!img) throw new ApiError('NOT_FOUND', `image ${name} not found`);
    return img;
  }

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

  /** Lets go of what the name stands for (a tagless name: `:latest` when held, else every tag). */
  async function release(reply: FastifyReply, workspace: string, names: string[], what: string) {
    if (!names.length) throw new ApiError('NOT_FOUND', `image ${what} not found`);
    const img = mustFind(workspace, names[0]);
    const shown = viewIn(workspace, img);
    try {
      images.releaseNames(workspace, names);
    } catch (e) {
      if (e instanceof ImageError && e.code === 'IN_USE') {
        const users = await sandboxesOn(workspace, img);
        if (users.length)
          throw new ApiError(
            'CONFLICT',
            `image ${what} is in use by sandbox ${users.join(', ')}: delete ${users.length > 1 ? 'them' : 'it'} first`,
            { code: 'IMAGE_IN_USE' },
          );
      }
      throw imageApiError(e);
    }
    await copiesOf(reply, deps.letGo, workspace, names);
    return { ...shown, references: [], inUse: false };
  }

  v0.get('/images', async (req) => {
    const a = requireRole(req, 'viewer');
    return images.heldBy(a.workspace).map((i) => viewIn(a.workspace, i));
  });

  for (const path of ['/images/*', '/images/:resourceType/:imageName']) {
    v0.get(path, async (req) => {
      const a = requireRole(req, 'viewer');
      return viewIn(a.workspace, mustFind(a.workspace, nameOf(req)));
    });
    v0.delete(path, async (req, reply) => {
      const a = requireRole(req, 'member');
      const name = nameOf(req);
      return release(
        reply,
        a.workspace,
        guard(() => images.namesFor(a.workspace, name)),
        name,
      );
    });
  }

  v0.delete('/images/:resourceType/:imageName/tags/:tagName', async (req, reply) => {
    const a = requireRole(req, 'member');
    const p = req.params as Record<string, string>;
    const name = `${p.resourceType}/${p.imageName}:${p.tagName}`;
    return release(
      reply,
      a.workspace,
      guard(() => images.namesFor(a.workspace, name)),
      name,
    );
  });

  // The service's cleanup: every name no sandbox, agent, function or job of the workspace names, and whose image
  // none of its sandboxes runs; and the workspace's Dockerfile layer cache.
  v0.delete('/images', async (req, reply) => {
    const a = requireRole(req, 'member');
    const keep = await deps.referenced(a.workspace);
    const gone = guard(() => images.cleanup(a.workspace, (name) => keep.has(name)));
    const layers = deps.clearBuildCache(a.workspace);
    await copiesOf(reply, deps.letGo, a.workspace, gone);
    return {
      deleted: gone.length,
      message: `let go of ${gone.length} image name${gone.length === 1 ? '' : 's'}${gone.length ? ` (${gone.join(', ')})` : ''}; dropped ${layers} cached build layer${layers === 1 ? '' : 's'}`,
    };
  });

  v0.post('/images', async (req, reply) => {
    const a = requireRole(req, 'member');
    const body = (req.body ?? {}) as {
      reference?: unknown;
      image?: unknown;
      name?: unknown;
      resourceType?: unknown;
    };
    // The service's createImage: a pre-built `image` registered under `resourceType/name`; a build from source is
    // POST /images/build here.
    if (body.reference === undefined && (body.name !== undefined || body.image !== undefined)) {
      if (typeof body.image !== 'string' || !body.image)
        throw invalid([
          {
            pointer: '/image',
            message:
              'Berth builds images from a context you send: POST /v0/images/build (berth image build <dir> -t name:tag); here, name a pre-built image to pull',
          },
        ]);
      if (typeof body.name !== 'string' || !body.name)
        throw invalid([{ pointer: '/name', message: 'a name is required' }]);
      const rt = typeof body.resourceType === 'string' && body.resourceType ? `${body.resourceType}/` : '';
      // Both names judged before anything is pulled: a bad one is a 422 naming its field, and nothing is fetched.
      const parsed = (text: string, pointer: string) => {
        try {
          return ImageStore.parse(text).canonical;
        } catch (e) {
          if (e instanceof ImageError) throw invalid([{ pointer, message: e.message }]);
          throw e;
        }
      };
      const image = parsed(body.image, '/image');
      const alias = parsed(`${rt}${body.name}`, rt ? '/resourceType' : '/name');
      let pulled: HeldImage;
      try {
        pulled = await images.pull(a.workspace, body.image);
      } catch (e) {
        throw imageApiError(e);
      }
      guard(() => images.bindNames(a.workspace, { [alias]: pulled.id.slice(7) }, true));
      await copiesOf(reply, deps.secondCopy, a.workspace, [pulled.id, alias]);
      return {
        ...viewIn(a.workspace, mustFind(a.workspace, alias)),
        image,
        name: body.name,
        ...(rt ? { resourceType: body.resourceType } : {}),
        message: `pulled ${body.image} and named it ${alias}`,
      };
    }
    const ref = body.reference;
    if (typeof ref !== 'string' || !ref)
      throw invalid([
        { pointer: '/reference', message: 'an image reference to pull, e.g. python:3.12-slim' },
      ]);
    let pulled: HeldImage;
    try {
      pulled = await images.pull(a.workspace, ref);
    } catch (e) {
      throw imageApiError(e);
    }
    await copiesOf(reply, deps.secondCopy, a.workspace, [pulled.id]);
    return viewIn(a.workspace, pulled);
  });

  v0.register(async (s) => {
    // The archive streams to the importer as it arrives: never buffered whole, capped there.
    s.addContentTypeParser(['application/x-tar', 'application/octet-stream'], (_req, payload, done) =>
      done(null, payload),
    );
    s.post('/images/import', async (req, reply) => {
      const a = requireRole(req, 'member');
      const name = (req.query as Record<string, string | undefined>).name || undefined;
      if (!req.body || typeof (req.body as Readable).pipe !== 'function')
        throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'send the archive as application/x-tar');
      let got: HeldImage[];
      try {
        got = await importArchive(images, a.workspace, req.body as Readable, name);
      } catch (e) {
        throw imageApiError(e);
      }
      await copiesOf(reply, deps.secondCopy, a.workspace, [...new Set(got.map((i) => i.id))]);
      return got.map((i) => viewIn(a.workspace, i));
    });
  });
}
