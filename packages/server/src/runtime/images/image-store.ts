// The image store under `<dataDir>/images/oci`. Content is addressed by digest and shared by every workspace of the
// server; names belong to one workspace (names.ts, docs/decisions/037-image-names-per-workspace.md):
//   blobs/sha256/<hex>        manifests, configs and compressed layers, verified (blobs.ts)
//   roots/<config hex>        the image's file tree, all layers applied once, read-only to sandboxes
//   images/<config hex>.json  what the image is (layers, config, sizes); it carries no name
//   names/, registry/         a workspace's names; what a pull from a registry got (names.ts)
// Every lookup by name takes the workspace: a name resolves to that workspace's own pull or import of it, else (for a
// registry's name) to what a pull from that registry got, pulled now if nothing was. An id resolves only among the
// images the workspace holds. The runtime is handed ids only (`get`), after a controller resolved the name.
// A root is built under roots/.tmp-* and renamed into place when whole, so a kill -9 mid-pull never leaves a root
// that looks finished. Concurrent pulls of one name by one workspace share one pull (and of one blob, one download).
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  createReadStream,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statfsSync,
} from 'node:fs';
import { join } from 'node:path';
import { canonicalReference, type ImageReference, parseImageReference } from '../../kinds/image-reference.js';
import { BlobStore } from './blobs.js';
import { ImageError } from './errors.js';
import {
  configOf,
  type Descriptor,
  hostArchitecture,
  type ImageConfig,
  isIndex,
  manifestOf,
  parseJson,
  pickPlatform,
} from './manifest.js';
import { goneKey, ImageNames, type NameTable, writeAtomic } from './names.js';
import { ImageShares, type ShareRecord } from './shares.js';
import {
  MANIFEST_TYPES,
  MAX_MANIFEST_BYTES,
  readCapped,
  RegistryClient,
  type RegistryOptions,
} from './registry.js';
import { Allowance, rootBytes } from './root-size.js';
import { applyLayer, isGzip } from './unpack.js';

/** A layer's uncompressed size cap by default: far above real base images (~100-500 MB), below a bomb. */
export const DEFAULT_MAX_LAYER_BYTES = 8 * 1024 ** 3;
/** Sum of an image's compressed layers by default, checked against the manifest before anything is fetched. */
export const DEFAULT_MAX_IMAGE_BYTES = 16 * 1024 ** 3;
/**
 * Unpacked bytes of the images one workspace holds, by default (BERTH_QUOTA_IMAGE_MB): room for the common bases
 * many times over (python:3.12-slim ~130 MB, node:22 ~1.1 GB) and for one large ML image (a CUDA PyTorch runtime,
 * ~7-8 GB), while one workspace cannot fill the disk every workspace shares.
 */
export const DEFAULT_IMAGE_QUOTA_BYTES = 10 * 1024 ** 3;

/** Disk space an image unpack never takes: the server, its database and its sandboxes need room too. */
export const DISK_RESERVE_BYTES = 1024 ** 3;

/** An image id: the config's digest, `sha256:<64 hex>` (bare hex accepted). */
export const IMAGE_ID = /^(?:sha256:)?([a-f0-9]{64})$/;
export const isImageId = (s: string) => IMAGE_ID.test(s);

export interface ImageStoreOptions extends RegistryOptions {
  dataDir: string;
  maxLayerBytes?: number;
  maxImageBytes?: number;
  /** OCI architecture to pull (default: the host's). */
  architecture?: string;
  /** Unpacked bytes the images of one workspace may take together (default DEFAULT_IMAGE_QUOTA_BYTES). */
  quotaBytes?: number;
  /** What the disk keeps free whatever images ask for (default DISK_RESERVE_BYTES). */
  diskReserveBytes?: number;
  /**
   * The image roots sandboxes run on: all of them (nothing of those is collected), or one workspace's (its images
   * in use, which it cannot let go of). Default: none.
   */
  rootsInUse?: (workspace?: string) => Set<string>;
}

export interface StoredImage {
  /** Image id: the config's digest. */
  id: string;
  /** Manifest digest (for a pull by tag, what the tag named then). */
  digest: string;
  layers: Descriptor[];
  config: ImageConfig;
  /** Compressed bytes of the layers. */
  size: number;
  /** What the root takes, as the image quota counts it (root-size.ts). */
  unpackedBytes: number;
  rootfs: string;
  createdAt: string;
}

/** An image as one workspace holds it. */
export interface HeldImage extends StoredImage {
  /** That workspace's names for it (never another workspace's). */
  references: string[];
}

/** What the runtime needs of the store: content by id, no names. */
export interface ImageRoots {
  get(id: string): StoredImage | undefined;
}

/** What a node's image store names, by workspace (ImageStore.catalog). */
export interface ImageCatalog {
  names: Record<string, Record<string, string>>;
  gone: Record<string, Record<string, string>>;
}

/** A workspace's image bytes against its limit (what a quota view shows). */
export interface ImageQuota {
  usedBytes: number;
  limitBytes: number;
}

const hex = (digest: string) => digest.slice('sha256:'.length);

/** `docker.io/local/app` of `docker.io/local/app:1` (or of `…@sha256:…`). */
export function repositoryOf(canonical: string): string {
  const at = canonical.indexOf('@');
  const rest = at >= 0 ? canonical.slice(0, at) : canonical;
  const colon = rest.lastIndexOf(':');
  return colon > rest.lastIndexOf('/') ? rest.slice(0, colon) : rest;
}
const mb = (n: number) => `${(n / 1024 ** 2).toFixed(1)} MB`;

export class ImageStore implements ImageRoots {
  readonly dir: string;
  readonly blobs: BlobStore;
  private readonly names: ImageNames;
  readonly shares: ImageShares;
  private readonly client: RegistryClient;
  /** When a workspace's use of an image was last recorded (markDeployed writes at most once a minute per image). */
  private readonly deployedSeen = new Map<string, number>();
  private readonly pulls = new Map<string, Promise<HeldImage>>();
  /** Pulls and imports under way: blobs they wrote may not be named by any image yet, so nothing is collected. */
  private busy = 0;
  private readonly arch: string;
  readonly quotaBytes: number;
  private readonly diskReserveBytes: number;

  constructor(readonly opts: ImageStoreOptions) {
    this.dir = join(opts.dataDir, 'images', 'oci');
    rmSync(join(this.dir, 'tmp'), { recursive: true, force: true }); // archive imports cut short
    for (const d of ['roots', 'images', 'tmp'])
      mkdirSync(join(this.dir, d), { recursive: true, mode: 0o700 });
    this.blobs = new BlobStore(this.dir);
    this.names = new ImageNames(this.dir);
    this.shares = new ImageShares(this.dir);
    this.client = new RegistryClient(opts);
    this.arch = opts.architecture ?? hostArchitecture();
    this.quotaBytes = opts.quotaBytes ?? DEFAULT_IMAGE_QUOTA_BYTES;
    this.diskReserveBytes = opts.diskReserveBytes ?? DISK_RESERVE_BYTES;
    for (const n of readdirSync(join(this.dir, 'roots')))
      if (n.startsWith('.tmp-')) rmSync(join(this.dir, 'roots', n), { recursive: true, force: true });
    this.names.migrate(join(this.dir, 'refs'), (id) => this.get(id) !== undefined);
  }

  static parse(name: string): { ref: ImageReference; canonical: string } {
    const p = parseImageReference(name);
    if (!p.ok) throw new ImageError('INVALID_REFERENCE', p.reason);
    return { ref: p.ref, canonical: canonicalReference(p.ref) };
  }

  /** The image with this id, whoever holds it: for the runtime, handed an id a controller resolved in a workspace. */
  get(id: string): StoredImage | undefined {
    const m = IMAGE_ID.exec(id);
    if (!m) return undefined;
    const f = join(this.dir, 'images', `${m[1]}.json`);
    if (!existsSync(f) || !existsSync(join(this.dir, 'roots', m[1]))) return undefined;
    // Records written before names moved out carry `references`: never shown.
    const { references: _names, ...image } = JSON.parse(readFileSync(f, 'utf8'));
    image.unpackedBytes ??= this.measure(image);
    return image as StoredImage;
  }

  /** Sizes a root recorded before sizes were (kept, so it is measured once). */
  private measure(image: Omit<StoredImage, 'unpackedBytes'>): number {
    const bytes = rootBytes(image.rootfs);
    writeAtomic(
      join(this.dir, 'images', `${hex(image.id)}.json`),
      JSON.stringify({ ...image, unpackedBytes: bytes }),
    );
    return bytes;
  }

  private held(workspace: string, image: StoredImage, names = this.names.of(workspace)): HeldImage {
    const id = hex(image.id);
    const references = [...names].filter(([, v]) => v === id).map(([k]) => k);
    return { ...image, references: references.sort() };
  }

  /**
   * `workspace`'s image for a name (its own pull or import of that name) or an id (among the images it holds),
   * without contacting any registry: what builds of the workspace's agents, functions and jobs run on.
   */
  find(workspace: string, nameOrId: string): HeldImage | undefined {
    const names = this.names.of(workspace);
    const m = IMAGE_ID.exec(nameOrId);
    const id = m
      ? [...names.values()].includes(m[1])
        ? m[1]
        : undefined
      : names.get(ImageStore.parse(nameOrId).canonical);
    const image = id && this.get(id);
    return image ? this.held(workspace, image, names) : undefined;
  }

  /**
   * What `workspace`'s name stands for now, without pulling or recording anything: its own, else what a pull from
   * the registry got. A controller compares a running sandbox with it; undefined: `resolve` would pull.
   */
  peek(workspace: string, nameOrId: string): StoredImage | undefined {
    const own = this.find(workspace, nameOrId);
    if (own || isImageId(nameOrId)) return own;
    const id = this.names.registry(ImageStore.parse(nameOrId).canonical);
    return id ? this.get(id) : undefined;
  }

  /**
   * The image a sandbox of `workspace` runs for `nameOrId`: the workspace's own; else, for a registry's name, what a
   * pull from that registry got, pulled now if nothing was. Either way the workspace then holds the name (its
   * sandbox asked for it, and it counts toward its quota). An id must be one the workspace holds. `ownNames: false`
   * skips the workspace's own names (a node of a cluster whose names are the leader's: peer-images.ts).
   */
  async resolve(workspace: string, nameOrId: string, opts: { ownNames?: boolean } = {}): Promise<HeldImage> {
    const image = await this.resolveName(workspace, nameOrId, opts.ownNames !== false);
    this.markDeployed(workspace, image.id);
    return image;
  }

  private async resolveName(workspace: string, nameOrId: string, ownNames: boolean): Promise<HeldImage> {
    const own = ownNames ? this.find(workspace, nameOrId) : undefined;
    if (own) return own;
    if (isImageId(nameOrId))
      throw new ImageError('NOT_FOUND', `image ${nameOrId} is not among this workspace's images`);
    const { canonical } = ImageStore.parse(nameOrId);
    const id = this.names.registry(canonical);
    const pulled = id && this.get(id);
    if (pulled) return this.bind(workspace, canonical, pulled, `image ${canonical}`);
    return this.pull(workspace, nameOrId);
  }

  /** Pulls `name` from its registry (again, for a tag: it may have moved) into `workspace`. */
  pull(workspace: string, name: string): Promise<HeldImage> {
    const { ref, canonical } = ImageStore.parse(name);
    this.names.of(workspace); // a bad workspace name fails before anything is fetched
    const key = `${workspace}\0${canonical}`;
    let p = this.pulls.get(key);
    if (!p) {
      p = this.writing(() => this.doPull(workspace, ref, canonical)).finally(() => this.pulls.delete(key));
      this.pulls.set(key, p);
    }
    return p;
  }

  /**
   * Runs a pull or an import: nothing is collected meanwhile (its blobs may not be named by an image yet), and what
   * a failed one left (blobs no image names) is removed once nothing else is under way.
   */
  async writing<T>(fn: () => Promise<T>): Promise<T> {
    this.busy++;
    let failed = false;
    try {
      return await fn();
    } catch (e) {
      failed = true;
      throw e;
    } finally {
      this.busy--;
      if (failed) this.collectBlobs();
    }
  }

  /** Images `workspace` holds by a name (the API lists these; its sandboxes run only on these). */
  heldBy(workspace: string): HeldImage[] {
    const names = this.names.of(workspace);
    return [...new Set(names.values())]
      .map((id) => this.get(id))
      .filter((i): i is StoredImage => !!i)
      .map((i) => this.held(workspace, i, names))
      .sort((a, b) => (a.references[0] ?? '').localeCompare(b.references[0] ?? ''));
  }

  /** Whether sandboxes run on the image: `workspace`'s, or anyone's when undefined. */
  inUse(image: StoredImage, workspace?: string): boolean {
    return this.opts.rootsInUse?.(workspace).has(image.rootfs) ?? false;
  }

  /** The unpacked bytes of the images `workspace` holds, and its limit. */
  usage(workspace: string): ImageQuota {
    return { usedBytes: this.bytesOf(this.names.of(workspace)), limitBytes: this.quotaBytes };
  }

  private bytesOf(names: NameTable): number {
    let total = 0;
    for (const id of new Set(names.values())) total += this.get(id)?.unpackedBytes ?? 0;
    return total;
  }

  /**
   * Lets go of `workspace`'s name (an id: every name it has for that image), refused with IN_USE while one of its
   * sandboxes runs on the image; then collects what nothing holds any more.
   */
  release(workspace: string, nameOrId: string): HeldImage {
    const img = this.find(workspace, nameOrId);
    if (!img) throw new ImageError('NOT_FOUND', `image ${nameOrId} is not among this workspace's images`);
    if (this.inUse(img, workspace))
      throw new ImageError('IN_USE', `image ${nameOrId} is in use by a sandbox`);
    const names = this.names.of(workspace);
    if (isImageId(nameOrId)) for (const r of img.references) names.delete(r);
    else names.delete(ImageStore.parse(nameOrId).canonical);
    this.names.set(workspace, names);
    this.collect();
    return img;
  }

  /** A deleted workspace's names go with it (a new workspace of the same name starts with none). */
  forgetWorkspace(workspace: string): void {
    this.names.drop(workspace);
    this.shares.dropWorkspace(workspace);
    this.collect();
  }

  /** Drops the names of every workspace not in `existing` (deleted while the server was down). Returns them. */
  keepWorkspaces(existing: Set<string>): string[] {
    const gone = [...new Set([...this.names.workspaces(), ...this.names.goneWorkspaces()])].filter(
      (w) => !existing.has(w),
    );
    for (const w of gone) this.names.drop(w);
    for (const r of this.shares.all())
      if (!existing.has(r.source) || !existing.has(r.target)) this.shares.remove(r.id);
    return gone;
  }

  /**
   * Every workspace's names (name → image id hex) and the names each let go of (`<name> <id hex>` → when): what the
   * nodes of a cluster compare to hold the same images (images-ahead.ts).
   */
  catalog(): ImageCatalog {
    const names: ImageCatalog['names'] = {};
    const gone: ImageCatalog['gone'] = {};
    for (const w of this.names.workspaces()) names[w] = Object.fromEntries(this.names.of(w));
    for (const w of this.names.goneWorkspaces()) {
      const g = this.names.gone(w);
      if (g.size) gone[w] = Object.fromEntries(g);
    }
    return { names, gone };
  }

  /** Whether `workspace` let go of `canonical` standing for the image `idHex` (within GONE_KEPT_MS). */
  isGone(workspace: string, canonical: string, idHex: string): boolean {
    return this.names.gone(workspace).has(goneKey(canonical, idHex));
  }

  /**
   * Another node's word that `workspace` let go of `canonical` standing for `idHex` at `at`: the name goes here too
   * (unless one of the workspace's sandboxes runs on the image here: false, to ask again later), and is remembered
   * as gone. A name bound here to another image stays.
   */
  letGo(workspace: string, canonical: string, idHex: string, at: string): boolean {
    const names = this.names.of(workspace);
    if (names.get(canonical) === idHex) {
      const image = this.get(idHex);
      if (image && this.inUse(image, workspace)) return false;
      names.delete(canonical);
      this.names.set(workspace, names);
      this.collect();
    }
    const gone = this.names.gone(workspace);
    const key = goneKey(canonical, idHex);
    if (gone.get(key) !== at) {
      gone.set(key, at);
      this.names.setGone(workspace, gone);
    }
    return true;
  }

  /** Records that `workspace` started something on the image now (its `lastDeployedAt`). */
  markDeployed(workspace: string, id: string): void {
    const key = `${workspace}\0${id}`;
    const now = Date.now();
    if (now - (this.deployedSeen.get(key) ?? 0) < 60_000) return;
    this.deployedSeen.set(key, now);
    const table = this.names.deployed(workspace);
    table.set(hex(id), new Date(now).toISOString());
    this.names.setDeployed(workspace, table);
  }

  /** When `workspace` last started something on one of these images (ids), if ever. */
  lastDeployed(workspace: string, ids: string[]): string | undefined {
    const table = this.names.deployed(workspace);
    return ids
      .map((id) => table.get(hex(id.startsWith('sha256:') ? id : `sha256:${id}`)))
      .filter((t): t is string => !!t)
      .sort()
      .at(-1);
  }

  /**
   * The canonical names of `workspace` a request names: with a tag or a digest, that one; without, `:latest` when
   * the workspace holds it, else every tag of the repository (the service's "image" is a repository). An id: every
   * name of that image.
   */
  namesFor(workspace: string, name: string): string[] {
    const names = this.names.of(workspace);
    const m = IMAGE_ID.exec(name);
    if (m) return [...names].filter(([, v]) => v === m[1]).map(([k]) => k);
    const { ref, canonical } = ImageStore.parse(name);
    if (names.has(canonical) || /@|:[^/]*$/.test(name)) return names.has(canonical) ? [canonical] : [];
    const repo = `${ref.registry}/${ref.repository}`;
    return [...names.keys()].filter((k) => repositoryOf(k) === repo).sort();
  }

  /** The tags `workspace` holds of the repository of `canonical`: each name with its image. */
  tagsOf(workspace: string, canonical: string): Array<{ name: string; image: StoredImage }> {
    const repo = repositoryOf(canonical);
    const out: Array<{ name: string; image: StoredImage }> = [];
    for (const [k, id] of this.names.of(workspace)) {
      const image = repositoryOf(k) === repo ? this.get(id) : undefined;
      if (image) out.push({ name: k, image });
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Lets go of several names at once (each refused while one of the workspace's sandboxes runs its image). */
  releaseNames(workspace: string, canonicals: string[]): StoredImage[] {
    const names = this.names.of(workspace);
    const images = canonicals.map((c) => {
      const image = names.has(c) ? this.get(names.get(c) as string) : undefined;
      if (!image) throw new ImageError('NOT_FOUND', `image ${c} is not among this workspace's images`);
      if (this.inUse(image, workspace)) throw new ImageError('IN_USE', `image ${c} is in use by a sandbox`);
      return image;
    });
    for (const c of canonicals) names.delete(c);
    this.names.set(workspace, names);
    this.collect();
    return images;
  }

  /**
   * Binds names (a share brought, or a tag) in `workspace`: its own names from now on, charged to its quota. A name the
   * workspace already holds for another image is a conflict unless `force`.
   */
  bindNames(workspace: string, refs: Record<string, string>, force: boolean): HeldImage[] {
    const names = this.names.of(workspace);
    const conflicts = Object.entries(refs).filter(([k, id]) => names.has(k) && names.get(k) !== id);
    if (conflicts.length && !force)
      throw new ImageError(
        'CONFLICT',
        `this workspace already holds ${conflicts.map(([k]) => k).join(', ')} for another image (accept with force=true to replace)`,
      );
    const out: HeldImage[] = [];
    for (const [k, id] of Object.entries(refs)) {
      const image = this.get(id);
      if (!image) throw new ImageError('NOT_FOUND', `the shared image ${k} is no longer in the store`);
      out.push(this.bind(workspace, k, image, `image ${k}`));
    }
    return out;
  }

  /** Drops names a share had bound in `workspace`, where they still stand for the shared images. */
  unbindShared(workspace: string, share: ShareRecord): void {
    const names = this.names.of(workspace);
    for (const [k, id] of Object.entries(share.references)) if (names.get(k) === id) names.delete(k);
    this.names.set(workspace, names);
    this.collect();
  }

  /**
   * Lets go of every name of `workspace` except those `keep` says are referenced, and those whose images its
   * sandboxes run on; returns the names let go of.
   */
  cleanup(workspace: string, keep: (canonical: string, image: StoredImage) => boolean): string[] {
    const names = this.names.of(workspace);
    const gone: string[] = [];
    for (const [k, id] of names) {
      const image = this.get(id);
      if (image && (keep(k, image) || this.inUse(image, workspace))) continue;
      names.delete(k);
      gone.push(k);
    }
    this.names.set(workspace, names);
    this.collect();
    return gone;
  }

  /**
   * Garbage collection: removes images no workspace holds by a name and no sandbox runs on, then what a registry
   * binding named of them, then unused blobs.
   */
  collect(): string[] {
    if (this.busy > 0) return []; // a pull or import in flight may need what no record names yet
    const held = new Set([...this.names.heldIds(), ...this.shares.pendingIds()]);
    const used = this.opts.rootsInUse?.() ?? new Set<string>();
    const removed: string[] = [];
    for (const img of this.list()) {
      if (held.has(hex(img.id)) || used.has(img.rootfs)) continue;
      this.removeUnheld(img);
      removed.push(img.id);
    }
    this.names.dropRegistryUnless((id) => this.get(id) !== undefined);
    this.collectBlobs();
    return removed;
  }

  private list(): StoredImage[] {
    return readdirSync(join(this.dir, 'images'))
      .filter((n) => n.endsWith('.json'))
      .map((n) => this.get(n.slice(0, -'.json'.length)))
      .filter((i): i is StoredImage => !!i);
  }

  private async fetchManifest(
    ref: ImageReference,
    at: string,
    what: string,
  ): Promise<{ doc: any; digest: string; type: string | null }> {
    const res = await this.client.get(ref, `manifests/${at}`, MANIFEST_TYPES, what);
    const bytes = await readCapped(res, MAX_MANIFEST_BYTES, what);
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    if (at.startsWith('sha256:') && digest !== at)
      throw new ImageError(
        'CORRUPT',
        `${what}: the registry sent a manifest with digest ${digest}, not ${at}`,
      );
    return { doc: parseJson(bytes, what), digest, type: res.headers.get('content-type') };
  }

  private async doPull(workspace: string, ref: ImageReference, canonical: string): Promise<HeldImage> {
    const what = `image ${canonical}`;
    let m = await this.fetchManifest(ref, ref.digest ?? (ref.tag as string), what);
    if (isIndex(m.doc, m.type))
      m = await this.fetchManifest(ref, pickPlatform(m.doc, this.arch, what).digest, what);
    const manifest = manifestOf(m.doc, what);
    const size = manifest.layers.reduce((s, l) => s + l.size, 0);
    const maxImage = this.opts.maxImageBytes ?? DEFAULT_MAX_IMAGE_BYTES;
    if (size > maxImage)
      throw new ImageError('TOO_LARGE', `${what}: ${size} bytes of layers exceed the limit of ${maxImage}`);
    const cfgPath = await this.blobs.fetch(
      this.client,
      ref,
      manifest.config.digest,
      manifest.config.size,
      what,
    );
    const config = configOf(parseJson(readFileSync(cfgPath), what), this.arch, what);
    const layers = await Promise.all(
      manifest.layers.map((l) => this.blobs.fetch(this.client, ref, l.digest, l.size, what)),
    );
    return this.install({
      workspace,
      canonical,
      pulled: true,
      digest: m.digest,
      manifest,
      config,
      layerFiles: layers,
      size,
      what,
    });
  }

  /**
   * Builds the root (unless an image with this config exists) within `workspace`'s image quota, records the image
   * and binds `canonical` to it for `workspace` only, and for the registry too when `pulled` from it. Pulls,
   * archive imports and derived images all come through here.
   */
  async install(p: {
    workspace: string;
    canonical: string;
    /** What the name's own registry served: only then does the name stand for it beyond this workspace. */
    pulled?: boolean;
    digest: string;
    manifest: { config: Descriptor; layers: Descriptor[] };
    config: ImageConfig;
    layerFiles: string[];
    size: number;
    what: string;
  }): Promise<HeldImage> {
    const id = hex(p.manifest.config.digest);
    let image = this.get(id);
    const fresh = !image;
    if (!image) {
      const rootfs = join(this.dir, 'roots', id);
      // A root without its record is a killed server's, whole (roots are renamed into place): measured, kept.
      const unpackedBytes = existsSync(rootfs)
        ? rootBytes(rootfs)
        : await this.build(rootfs, p.layerFiles, this.allowance(p.workspace, p.canonical, p.what), p.what);
      image = {
        id: p.manifest.config.digest,
        digest: p.digest,
        layers: p.manifest.layers,
        config: p.config,
        size: p.size,
        unpackedBytes,
        rootfs,
        createdAt: new Date().toISOString(),
      };
      writeAtomic(join(this.dir, 'images', `${id}.json`), JSON.stringify(image));
    }
    let held: HeldImage;
    try {
      held = this.bind(p.workspace, p.canonical, image, p.what);
    } catch (e) {
      if (fresh) this.removeUnheld(image);
      throw e;
    }
    if (p.pulled) this.names.setRegistry(p.canonical, id, p.digest);
    return held;
  }

  /** The layers applied in order into a new root, stopped as soon as it passes `allowance`. Returns its bytes. */
  private async build(
    rootfs: string,
    layerFiles: string[],
    allowance: Allowance,
    what: string,
  ): Promise<number> {
    const tmp = join(this.dir, 'roots', `.tmp-${randomBytes(6).toString('hex')}`);
    mkdirSync(tmp, { mode: 0o755 });
    try {
      for (const f of layerFiles) await this.applyFile(tmp, f, allowance, what);
      chmodSync(tmp, 0o755);
      const bytes = rootBytes(tmp);
      if (bytes > allowance.bytes) throw allowance.refusal();
      if (existsSync(rootfs)) rmSync(tmp, { recursive: true, force: true });
      else renameSync(tmp, rootfs);
      return bytes;
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true });
      throw e;
    }
  }

  /** What a new image named `canonical` may take in `workspace`: its quota less what its other names hold. */
  private allowance(workspace: string, canonical: string, what: string): Allowance {
    const others = this.names.of(workspace);
    others.delete(canonical);
    const left = Math.max(0, this.quotaBytes - this.bytesOf(others));
    // The disk is a bound too: an image larger than what it has free is refused at the entry that passes it.
    const fs = statfsSync(this.dir);
    const free = Math.max(0, fs.bavail * fs.bsize - this.diskReserveBytes);
    if (free < left)
      return new Allowance(
        free,
        () =>
          new ImageError(
            'TOO_LARGE',
            `${what}: unpacks to more than the ${mb(free)} the disk has free (keeping ${mb(this.diskReserveBytes)} for everything else)`,
          ),
      );
    return new Allowance(left, () =>
      this.quotaError(workspace, what, `unpacks to more than the ${mb(left)} left of it`),
    );
  }

  /** Records `canonical` → `image` for `workspace`, refused when that passes its quota (and adds to its bytes). */
  private bind(workspace: string, canonical: string, image: StoredImage, what: string): HeldImage {
    const names = this.names.of(workspace);
    const before = this.bytesOf(names);
    names.set(canonical, hex(image.id));
    const after = this.bytesOf(names);
    if (after > this.quotaBytes && after > before)
      throw this.quotaError(workspace, what, `takes ${mb(image.unpackedBytes)}`);
    this.names.set(workspace, names);
    return this.held(workspace, image, names);
  }

  private quotaError(workspace: string, what: string, needs: string): ImageError {
    const used = this.bytesOf(this.names.of(workspace));
    return new ImageError(
      'QUOTA_EXCEEDED',
      `${what}: workspace ${workspace}'s image quota is ${mb(this.quotaBytes)} of unpacked images (BERTH_QUOTA_IMAGE_MB), ${mb(used)} of it used; the image ${needs}`,
    );
  }

  private removeUnheld(image: StoredImage): void {
    const id = hex(image.id);
    if (this.names.heldIds().has(id) || this.shares.pendingIds().has(id) || this.inUse(image)) return;
    rmSync(join(this.dir, 'images', `${hex(image.id)}.json`), { force: true });
    rmSync(image.rootfs, { recursive: true, force: true });
  }

  private async applyFile(root: string, file: string, allowance: Allowance, what: string): Promise<void> {
    const head = Buffer.alloc(4);
    const fd = openSync(file, 'r');
    try {
      readSync(fd, head, 0, 4, 0);
    } finally {
      closeSync(fd);
    }
    if (head.readUInt32LE(0) === 0xfd2fb528)
      throw new ImageError(
        'UNSUPPORTED',
        `${what}: zstd-compressed layers are not supported (push with gzip)`,
      );
    const limits = { maxLayerBytes: this.opts.maxLayerBytes ?? DEFAULT_MAX_LAYER_BYTES, allowance };
    await applyLayer(root, createReadStream(file), isGzip(head), limits, what);
  }

  /** Deletes blobs no stored image names (a layer shared by two images stays while either does). */
  collectBlobs(): number {
    if (this.busy > 0) return 0;
    const keep = new Set<string>();
    for (const i of this.list()) {
      keep.add(i.id);
      for (const l of i.layers) keep.add(l.digest);
    }
    let n = 0;
    for (const d of this.blobs.list())
      if (!keep.has(d)) {
        this.blobs.remove(d);
        n++;
      }
    return n;
  }
}
