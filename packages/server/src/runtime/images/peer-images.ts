// Images across the nodes of a cluster (docs/decisions/081-images-across-nodes.md). A workspace's images (imported,
// built, pushed, accepted from a share, pulled for one of its sandboxes) and its names for them are in the image
// store of the server leading the controllers: every image route is served there (http/peer-forward.ts). A sandbox
// placed on another node gets its image from there before it starts:
//   GET /peer/images/<workspace>/resolve?name=<name or id>  what the workspace's name (or id) stands for there
//   GET /peer/images/<workspace>/<id>/blobs/<digest>        the config or a layer of that image, as stored
// Both answer only a server showing the cluster's peer token (crypto/peer-token.ts), and only about an image the named
// workspace holds there: anything else is 404, the same answer as a wrong token. The copying node checks each blob
// against its digest as it arrives (blobs.ts), builds the root under a temporary name as a pull does, then binds the
// workspace's name here: its sandboxes of that name run on the same image on every node.
import { readFileSync, statSync } from 'node:fs';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PEER_TOKEN_HEADER, showsPeerToken } from '../../crypto/peer-token.js';
import { notFound } from '../../errors.js';
import { NAME_PATTERN } from '../../kinds/common.js';
import { ImageError } from './errors.js';
import { type HeldImage, ImageStore, isImageId } from './image-store.js';
import { configOf, type Descriptor, hostArchitecture, parseJson } from './manifest.js';

const WORKSPACE = new RegExp(NAME_PATTERN);
const DIGEST = /^sha256:[a-f0-9]{64}$/;
/** What asking the holder what a name stands for may take; a copy of the blobs may take longer (a large image). */
const RESOLVE_TIMEOUT_MS = 15_000;
const COPY_TIMEOUT_MS = 30 * 60_000;

/** Where the workspace's images are: here, at a peer, or nowhere now (between a leader's death and the takeover). */
export type ImageHolder = () => { here: true } | { peer: URL } | { unavailable: string };

/** What the holder answers about a workspace's image. */
export interface PeerImage {
  id: string;
  digest: string;
  /** The workspace's names for it at the holder. */
  references: string[];
  config: Descriptor;
  layers: Descriptor[];
  size: number;
}

export interface PeerImagesDeps {
  images: ImageStore;
  /** This cluster's peer token (peerToken of the master key). */
  token: string;
  holder: ImageHolder;
}

export class PeerImages {
  /** Copies under way: `<workspace>\0<id>` → the copy (two sandboxes of one image on a node share it). */
  private readonly copies = new Map<string, Promise<HeldImage>>();

  constructor(private readonly deps: PeerImagesDeps) {}

  /** The peer routes: what a workspace's image is, and its blobs, to a server of the cluster. */
  register(app: FastifyInstance) {
    const { images, token } = this.deps;
    /** The image `workspace` holds for `nameOrId`, or 404 (a wrong token, workspace or name alike). */
    const heldImage = (req: FastifyRequest, workspace: string, nameOrId: string) => {
      if (!showsPeerToken(req.headers, token) || !WORKSPACE.test(workspace)) throw notFound('image');
      let image: HeldImage | undefined;
      try {
        image = images.find(workspace, nameOrId);
      } catch {
        image = undefined; // a malformed name names nothing
      }
      if (!image) throw notFound('image');
      return image;
    };
    app.get('/peer/images/:workspace/resolve', async (req: FastifyRequest) => {
      const { workspace } = req.params as { workspace: string };
      const image = heldImage(req, workspace, String((req.query as { name?: unknown }).name ?? ''));
      if (!images.blobs.has(image.id)) throw notFound('image'); // its config collected under it: nothing to give
      const answer: PeerImage = {
        id: image.id,
        digest: image.digest,
        references: image.references,
        config: { digest: image.id, size: statSync(images.blobs.path(image.id)).size },
        layers: image.layers.map((l) => ({ digest: l.digest, size: l.size, mediaType: l.mediaType })),
        size: image.size,
      };
      return answer;
    });
    app.get('/peer/images/:workspace/:id/blobs/:digest', async (req: FastifyRequest, reply: FastifyReply) => {
      const { workspace, id, digest } = req.params as { workspace: string; id: string; digest: string };
      if (!isImageId(id) || !DIGEST.test(digest)) throw notFound('image');
      const image = heldImage(req, workspace, id);
      // Only the blobs of that image: a digest of another image (another workspace's) is not reachable here.
      if (digest !== image.id && !image.layers.some((l) => l.digest === digest)) throw notFound('image');
      if (!images.blobs.has(digest)) throw notFound('image');
      reply.header('content-type', 'application/octet-stream');
      return reply.send(images.blobs.stream(digest));
    });
  }

  /**
   * The image a sandbox of `workspace` runs for `nameOrId` on this node: where this server holds the workspace's
   * images, its own resolution; elsewhere the holder's, copied here if this store lacks it. A registry's name the
   * workspace does not hold at the holder is resolved here (this node pulls it itself, through its outbound rules);
   * an id it does not hold there is NOT_FOUND. Throws ImageError naming the image when it cannot be had.
   */
  async resolve(workspace: string, nameOrId: string): Promise<HeldImage> {
    const { images } = this.deps;
    const where = this.deps.holder();
    if ('here' in where) return images.resolve(workspace, nameOrId);
    const what = `image ${nameOrId}`;
    if ('unavailable' in where)
      throw new ImageError(
        'UNREACHABLE',
        `${what}: the server holding this workspace's images cannot be asked now (${where.unavailable})`,
      );
    const held = await this.ask(where.peer, workspace, nameOrId, what);
    if (!held) {
      if (isImageId(nameOrId))
        throw new ImageError('NOT_FOUND', `image ${nameOrId} is not among this workspace's images`);
      // Not the workspace's own there: a registry's name, resolved here as on a single server, but never through a
      // name this node bound earlier from the holder (the workspace may have let go of it since).
      return images.resolve(workspace, nameOrId, { ownNames: false });
    }
    const names = (isImageId(nameOrId) ? held.references : [nameOrId]).map(
      (n) => ImageStore.parse(n).canonical,
    );
    if (!names.length) throw new ImageError('CORRUPT', `${what}: the server holding it named it nothing`);
    const key = `${workspace}\0${held.id}`;
    let copy = this.copies.get(key);
    if (!copy) {
      copy = this.copy(where.peer, workspace, held, names, what).finally(() => this.copies.delete(key));
      this.copies.set(key, copy);
    }
    const image = await copy;
    // The names the caller asked by (a second caller of the same copy may have asked by another).
    const bound = images.bindNames(workspace, Object.fromEntries(names.map((n) => [n, held.id])), true);
    images.markDeployed(workspace, held.id);
    return bound[0] ?? image;
  }

  /** Whether `workspace` holds the image `id` (where its images are): a create naming an image by id is judged so. */
  async holds(workspace: string, id: string): Promise<boolean> {
    const where = this.deps.holder();
    if (!('peer' in where)) return this.deps.images.find(workspace, id) !== undefined;
    return (await this.ask(where.peer, workspace, id, `image ${id}`)) !== undefined;
  }

  /** The holder's answer about `workspace`'s `nameOrId`; undefined when the workspace holds no such image there. */
  private async ask(
    peer: URL,
    workspace: string,
    nameOrId: string,
    what: string,
  ): Promise<PeerImage | undefined> {
    const url = new URL(`/peer/images/${workspace}/resolve`, peer);
    url.searchParams.set('name', nameOrId);
    let r: Response;
    try {
      r = await fetch(url, {
        headers: { [PEER_TOKEN_HEADER]: this.deps.token },
        signal: AbortSignal.timeout(RESOLVE_TIMEOUT_MS),
      });
    } catch (err) {
      throw unreachable(what, peer, (err as Error).message);
    }
    if (r.status === 404) {
      await r.body?.cancel();
      return undefined;
    }
    if (!r.ok) {
      await r.body?.cancel();
      throw unreachable(what, peer, `it answered ${r.status}`);
    }
    const held = (await r.json()) as PeerImage;
    const digests = [held.config, ...(held.layers ?? [])];
    if (
      !isImageId(held.id) ||
      held.config?.digest !== held.id ||
      !digests.every((d) => DIGEST.test(String(d?.digest)) && Number.isSafeInteger(d.size))
    )
      throw new ImageError('CORRUPT', `${what}: the server holding it described it wrongly`);
    return held;
  }

  /** Copies the image's blobs this store lacks (each checked against its digest), then installs it under `names`. */
  private copy(
    peer: URL,
    workspace: string,
    held: PeerImage,
    names: string[],
    what: string,
  ): Promise<HeldImage> {
    const { images } = this.deps;
    return images.writing(async () => {
      for (const d of [held.config, ...held.layers]) {
        if (images.blobs.has(d.digest)) continue;
        const url = new URL(`/peer/images/${workspace}/${held.id}/blobs/${d.digest}`, peer);
        let r: Response;
        try {
          r = await fetch(url, {
            headers: { [PEER_TOKEN_HEADER]: this.deps.token },
            signal: AbortSignal.timeout(COPY_TIMEOUT_MS),
          });
        } catch (err) {
          throw unreachable(what, peer, (err as Error).message);
        }
        if (!r.ok || !r.body) {
          await r.body?.cancel();
          throw unreachable(what, peer, `it answered ${r.status} for blob ${d.digest}`);
        }
        // Verified on the stream, renamed into place only when digest and size match (blobs.ts).
        await images.blobs.write(Readable.fromWeb(r.body as WebReadableStream), d.digest, d.size, what);
      }
      const arch = images.opts.architecture ?? hostArchitecture();
      const config = configOf(parseJson(readFileSync(images.blobs.path(held.id)), what), arch, what);
      return images.install({
        workspace,
        canonical: names[0],
        digest: held.digest,
        manifest: { config: held.config, layers: held.layers },
        config,
        layerFiles: held.layers.map((l) => images.blobs.path(l.digest)),
        size: held.size,
        what,
      });
    });
  }
}

const unreachable = (what: string, peer: URL, why: string) =>
  new ImageError(
    'UNREACHABLE',
    `${what}: the server holding this workspace's images (${peer.host}) could not give it (${why}); try again once it answers`,
  );
