// Images across the nodes of a cluster (docs/decisions/081-images-across-nodes.md, 087-images-ahead.md). A
// workspace's images (imported, built, pushed, accepted from a share, pulled for one of its sandboxes) and its names
// for them are written in the image store of the server leading the controllers: every image route is served there
// (http/peer-forward.ts). Every other node copies them ahead (images-ahead.ts) and, for a sandbox placed on it, asks
// the leader what the workspace's name stands for, then copies what it lacks from the leader or any node holding it:
//   GET /peer/images                                        every workspace's names here, and the names let go of
//   POST /peer/images/ahead                                 the leader wrote an image: compare with it now
//   GET /peer/images/<workspace>/resolve?name=<name or id>  what the workspace's name (or id) stands for there
//   GET /peer/images/<workspace>/<id>/blobs/<digest>        the config or a layer of that image, as stored
// They answer only a server showing the cluster's peer token (crypto/peer-token.ts); the last two only about an image
// the named workspace holds there: anything else is 404, the same answer as a wrong token. The copying node checks
// each blob against its digest as it arrives (blobs.ts), builds the root under a temporary name as a pull does, then
// binds the workspace's name here: its sandboxes of that name run on the same image on every node. While the leader
// cannot be asked (between its death and the takeover), a node resolves the name in its own copies, else at any node
// holding it.
import { createHash } from 'node:crypto';
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
  /** The peer addresses of the other healthy nodes (the leader among them): where else an image may be held. */
  peers?: () => Promise<URL[]>;
}

export class PeerImages {
  /** Copies under way: `<workspace>\0<id>` → the copy (two sandboxes of one image on a node share it). */
  private readonly copies = new Map<string, Promise<HeldImage>>();
  /** Told when the leader says it wrote an image (`POST /peer/images/ahead`): images ahead looks at once. */
  onNudge?: () => void;

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
    app.get('/peer/images', async (req: FastifyRequest, reply: FastifyReply) => {
      if (!showsPeerToken(req.headers, token)) throw notFound('image');
      const body = JSON.stringify(images.catalog());
      // Asked every second by each node: unchanged, it is a 304 of no body.
      const tag = `"${createHash('sha256').update(body).digest('base64url')}"`;
      reply.header('etag', tag);
      if (req.headers['if-none-match'] === tag) return reply.code(304).send();
      reply.header('content-type', 'application/json');
      return reply.send(body);
    });
    app.post('/peer/images/ahead', async (req: FastifyRequest, reply: FastifyReply) => {
      // A node that does not copy ahead (BERTH_IMAGES_AHEAD=false) says so: a write does not wait for it.
      if (!showsPeerToken(req.headers, token) || !this.onNudge) throw notFound('image');
      this.onNudge();
      return reply.code(204).send();
    });
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
   * images, its own resolution; elsewhere the leader's, copied here (from the leader or any node holding it) if this
   * store lacks it. A registry's name the workspace does not hold at the leader is resolved here (this node pulls it
   * itself, through its outbound rules); an id it does not hold there is NOT_FOUND. While the leader cannot be asked,
   * this node's own copy (images ahead), else any node's. Throws ImageError naming the image when it cannot be had.
   */
  async resolve(workspace: string, nameOrId: string): Promise<HeldImage> {
    const { images } = this.deps;
    const where = this.deps.holder();
    if ('here' in where) return images.resolve(workspace, nameOrId);
    const what = `image ${nameOrId}`;
    let held: PeerImage | undefined;
    try {
      if ('unavailable' in where)
        throw new ImageError(
          'UNREACHABLE',
          `${what}: the server holding this workspace's images cannot be asked now (${where.unavailable})`,
        );
      held = await this.ask(where.peer, workspace, nameOrId, what);
    } catch (err) {
      if (!(err instanceof ImageError) || err.code !== 'UNREACHABLE') throw err;
      return this.resolveWithoutLeader(workspace, nameOrId, what, err);
    }
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
    const image = await this.obtain(workspace, held, [where.peer], what);
    // The names the caller asked by (a second caller of the same copy may have asked by another).
    const bound = images.bindNames(workspace, Object.fromEntries(names.map((n) => [n, held.id])), true);
    images.markDeployed(workspace, held.id);
    return bound[0] ?? image;
  }

  /**
   * The leader cannot be asked: this node's own copy of the workspace's name (copied ahead), else the first other
   * node that holds it. `why` (the leader's failure) is thrown when none does: whether the name is the workspace's
   * or a registry's is the leader's to say.
   */
  private async resolveWithoutLeader(
    workspace: string,
    nameOrId: string,
    what: string,
    why: ImageError,
  ): Promise<HeldImage> {
    const { images } = this.deps;
    let own: HeldImage | undefined;
    try {
      own = images.find(workspace, nameOrId);
    } catch {
      own = undefined; // a malformed name: the leader's error says it
    }
    if (own) {
      images.markDeployed(workspace, own.id);
      return own;
    }
    for (const peer of (await this.deps.peers?.()) ?? []) {
      const held = await this.ask(peer, workspace, nameOrId, what).catch(() => undefined);
      if (!held) continue;
      const names = (isImageId(nameOrId) ? held.references : [nameOrId]).map(
        (n) => ImageStore.parse(n).canonical,
      );
      if (!names.length) continue;
      await this.obtain(workspace, held, [peer], what);
      const bound = images.bindNames(workspace, Object.fromEntries(names.map((n) => [n, held.id])), true);
      images.markDeployed(workspace, held.id);
      return bound[0];
    }
    throw why;
  }

  /**
   * Copies `workspace`'s image `id` here, from the first of `sources` that holds it, and binds `names` to it (the
   * nodes' background copies: images-ahead.ts). False when no source holds it now.
   */
  async copyAhead(workspace: string, id: string, names: string[], sources: URL[]): Promise<boolean> {
    const what = `image ${names[0] ?? id}`;
    for (const peer of sources) {
      const held = await this.ask(peer, workspace, id, what).catch((err) => {
        if (sources.length === 1) throw err;
        return undefined;
      });
      if (!held || held.id !== id) continue;
      await this.obtain(workspace, held, [peer, ...sources.filter((s) => s !== peer)], what);
      this.deps.images.bindNames(workspace, Object.fromEntries(names.map((n) => [n, held.id])), true);
      return true;
    }
    return false;
  }

  /** The workspace's image `held` in this store: copied (once, shared by concurrent callers) unless already here. */
  private obtain(workspace: string, held: PeerImage, sources: URL[], what: string): Promise<HeldImage> {
    const key = `${workspace}\0${held.id}`;
    let copy = this.copies.get(key);
    if (!copy) {
      const names = held.references.map((n) => ImageStore.parse(n).canonical);
      if (!names.length)
        return Promise.reject(new ImageError('CORRUPT', `${what}: the server holding it named it nothing`));
      copy = this.copy(sources, workspace, held, names, what).finally(() => this.copies.delete(key));
      this.copies.set(key, copy);
    }
    return copy;
  }

  /** Whether `workspace` holds the image `id` (where its images are): a create naming an image by id is judged so. */
  async holds(workspace: string, id: string): Promise<boolean> {
    const where = this.deps.holder();
    if (!('peer' in where)) return this.deps.images.find(workspace, id) !== undefined;
    try {
      return (await this.ask(where.peer, workspace, id, `image ${id}`)) !== undefined;
    } catch (err) {
      if (this.deps.images.find(workspace, id)) return true;
      throw err;
    }
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

  /** One blob of a workspace's image from `peer`, verified on the stream and renamed into place (blobs.ts). */
  private async copyBlob(peer: URL, workspace: string, id: string, d: Descriptor, what: string) {
    const url = new URL(`/peer/images/${workspace}/${id}/blobs/${d.digest}`, peer);
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
    await this.deps.images.blobs.write(Readable.fromWeb(r.body as WebReadableStream), d.digest, d.size, what);
  }

  /**
   * Copies the image's blobs this store lacks (each checked against its digest), each from the first of `sources`
   * that gives it whole, then installs it under `names`.
   */
  private copy(
    sources: URL[],
    workspace: string,
    held: PeerImage,
    names: string[],
    what: string,
  ): Promise<HeldImage> {
    const { images } = this.deps;
    return images.writing(async () => {
      for (const d of [held.config, ...held.layers]) {
        let failed: unknown;
        for (const peer of sources) {
          if (images.blobs.has(d.digest)) break;
          try {
            await this.copyBlob(peer, workspace, held.id, d, what);
          } catch (err) {
            failed = err;
          }
        }
        if (!images.blobs.has(d.digest)) throw failed;
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
