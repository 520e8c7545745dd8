// The image store, content-addressed under `<dataDir>/images/oci` and shared by every workspace of the server:
//   blobs/sha256/<hex>   manifests, configs and compressed layers, verified (blobs.ts)
//   roots/<config hex>   the image's file tree, all layers applied once, read-only to sandboxes
//   images/<config hex>.json  what was pulled (layers, config, size); refs/<hash>.json: a name → an image
// A root is built under roots/.tmp-* and renamed into place when whole, so a kill -9 mid-pull never leaves a root
// that looks finished. Concurrent pulls of one name share one pull (and of one blob, one download).
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  openSync,
  readSync,
  closeSync,
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
import {
  MANIFEST_TYPES,
  MAX_MANIFEST_BYTES,
  readCapped,
  RegistryClient,
  type RegistryOptions,
} from './registry.js';
import { finishRoot } from './root-layout.js';
import { applyLayer, isGzip } from './unpack.js';

/** A layer's uncompressed size cap by default: far above real base images (~100-500 MB), below a bomb. */
export const DEFAULT_MAX_LAYER_BYTES = 8 * 1024 ** 3;
/** Sum of an image's compressed layers by default, checked against the manifest before anything is fetched. */
export const DEFAULT_MAX_IMAGE_BYTES = 16 * 1024 ** 3;

export interface ImageStoreOptions extends RegistryOptions {
  dataDir: string;
  maxLayerBytes?: number;
  maxImageBytes?: number;
  /** OCI architecture to pull (default: the host's). */
  architecture?: string;
}

export interface StoredImage {
  /** Image id: the config's digest. */
  id: string;
  /** Names this image was pulled or imported as. */
  references: string[];
  /** Manifest digest (for a pull by tag, what the tag named then). */
  digest: string;
  layers: Descriptor[];
  config: ImageConfig;
  /** Compressed bytes of the layers. */
  size: number;
  rootfs: string;
  createdAt: string;
}

const hex = (digest: string) => digest.slice('sha256:'.length);
const keyOf = (canonical: string) => createHash('sha256').update(canonical).digest('hex').slice(0, 32);

export class ImageStore {
  readonly dir: string;
  readonly blobs: BlobStore;
  private readonly client: RegistryClient;
  private readonly pulls = new Map<string, Promise<StoredImage>>();
  private readonly arch: string;

  constructor(readonly opts: ImageStoreOptions) {
    this.dir = join(opts.dataDir, 'images', 'oci');
    rmSync(join(this.dir, 'tmp'), { recursive: true, force: true }); // archive imports cut short
    for (const d of ['roots', 'images', 'refs', 'tmp'])
      mkdirSync(join(this.dir, d), { recursive: true, mode: 0o700 });
    this.blobs = new BlobStore(this.dir);
    this.client = new RegistryClient(opts);
    this.arch = opts.architecture ?? hostArchitecture();
    for (const n of readdirSync(join(this.dir, 'roots')))
      if (n.startsWith('.tmp-')) rmSync(join(this.dir, 'roots', n), { recursive: true, force: true });
  }

  static parse(name: string): { ref: ImageReference; canonical: string } {
    const p = parseImageReference(name);
    if (!p.ok) throw new ImageError('INVALID_REFERENCE', p.reason);
    return { ref: p.ref, canonical: canonicalReference(p.ref) };
  }

  /** The image a name stands for in the store, without contacting any registry. */
  find(name: string): StoredImage | undefined {
    if (/^(sha256:)?[a-f0-9]{64}$/.test(name)) return this.byId(name.replace(/^sha256:/, ''));
    const { canonical } = ImageStore.parse(name);
    const refFile = join(this.dir, 'refs', `${keyOf(canonical)}.json`);
    if (!existsSync(refFile)) return undefined;
    return this.byId(JSON.parse(readFileSync(refFile, 'utf8')).id);
  }

  /**
   * The image `name` stands for when `workspace` holds that name (pulled or imported through /v0/images), without
   * contacting any registry: what builds of the workspace's agents, functions and jobs may run on.
   */
  findHeld(name: string, workspace: string): StoredImage | undefined {
    const { canonical } = ImageStore.parse(name);
    const refFile = join(this.dir, 'refs', `${keyOf(canonical)}.json`);
    if (!existsSync(refFile)) return undefined;
    const r = JSON.parse(readFileSync(refFile, 'utf8'));
    return (r.workspaces ?? []).includes(workspace) ? this.byId(r.id) : undefined;
  }

  private byId(idHex: string): StoredImage | undefined {
    const f = join(this.dir, 'images', `${idHex}.json`);
    if (!existsSync(f) || !existsSync(join(this.dir, 'roots', idHex))) return undefined;
    const image: StoredImage = JSON.parse(readFileSync(f, 'utf8'));
    // The names are the ref files that point here now (a released name no longer does).
    image.references = this.refsOf()
      .filter((r) => r.id === idHex)
      .map((r) => r.reference)
      .sort();
    return image;
  }

  list(): StoredImage[] {
    return readdirSync(join(this.dir, 'images'))
      .filter((n) => n.endsWith('.json'))
      .map((n) => this.byId(n.slice(0, -5)))
      .filter((i): i is StoredImage => !!i);
  }

  /** The stored image, pulled first when the name is not in the store (a digest reference is never re-pulled). */
  async resolve(name: string): Promise<StoredImage> {
    return this.find(name) ?? this.pull(name);
  }

  /** Pulls `name` from its registry (again, for a tag: it may have moved); records it for `workspace`. */
  async pull(name: string, workspace?: string): Promise<StoredImage> {
    const { ref, canonical } = ImageStore.parse(name);
    let p = this.pulls.get(canonical);
    if (!p) {
      p = this.doPull(ref, canonical).finally(() => this.pulls.delete(canonical));
      this.pulls.set(canonical, p);
    }
    const image = await p;
    if (workspace) this.hold(canonical, image, workspace);
    return image;
  }

  private refsOf(): Array<{ file: string; reference: string; id: string; workspaces: string[] }> {
    const d = join(this.dir, 'refs');
    return readdirSync(d)
      .filter((n) => n.endsWith('.json'))
      .map((n) => ({ file: join(d, n), ...JSON.parse(readFileSync(join(d, n), 'utf8')) }))
      .map((r) => ({ ...r, workspaces: r.workspaces ?? [] }));
  }

  private hold(canonical: string, image: StoredImage, workspace: string): void {
    const f = join(this.dir, 'refs', `${keyOf(canonical)}.json`);
    const r = existsSync(f)
      ? JSON.parse(readFileSync(f, 'utf8'))
      : { reference: canonical, id: hex(image.id) };
    const workspaces = [...new Set([...(r.workspaces ?? []), workspace])];
    writeAtomic(f, JSON.stringify({ ...r, workspaces }));
  }

  /** Images a workspace pulled or imported by name (the API lists these, plus its sandboxes' images). */
  heldBy(workspace: string): StoredImage[] {
    const ids = new Set(
      this.refsOf()
        .filter((r) => r.workspaces.includes(workspace))
        .map((r) => r.id),
    );
    return this.list().filter((i) => ids.has(hex(i.id)));
  }

  /**
   * Lets go of a name for `workspace` (every workspace when undefined), refused with IN_USE while a sandbox runs
   * on the image; then collects what nothing holds any more.
   */
  release(name: string, workspace: string | undefined, inUse: (rootfs: string) => boolean): StoredImage {
    const img = this.find(name);
    if (!img) throw new ImageError('NOT_FOUND', `image ${name} is not in the store`);
    if (inUse(img.rootfs)) throw new ImageError('IN_USE', `image ${name} is in use by a sandbox`);
    // A name lets go of that name only; an id, of every name of the image.
    const byId = /^(sha256:)?[a-f0-9]{64}$/.test(name);
    const canonical = byId ? undefined : ImageStore.parse(name).canonical;
    for (const r of this.refsOf()) {
      if (r.id !== hex(img.id) || (canonical && r.reference !== canonical)) continue;
      const workspaces = workspace ? r.workspaces.filter((w) => w !== workspace) : [];
      const { file, ...rest } = r;
      if (workspaces.length) writeAtomic(file, JSON.stringify({ ...rest, workspaces }));
      else rmSync(file, { force: true });
    }
    this.collect(inUse);
    return img;
  }

  /**
   * Garbage collection: removes images no workspace holds by name and no sandbox runs on (a sandbox's own pull
   * holds nothing: its image stays while a sandbox uses it, and until the next collection), then unused blobs.
   */
  collect(inUse: (rootfs: string) => boolean): string[] {
    if (this.pulls.size > 0) return []; // a pull in flight may need what no record names yet
    const held = new Set(
      this.refsOf()
        .filter((r) => r.workspaces.length > 0)
        .map((r) => r.id),
    );
    const removed: string[] = [];
    for (const img of this.list()) {
      const id = hex(img.id);
      if (held.has(id) || inUse(img.rootfs)) continue;
      for (const r of this.refsOf()) if (r.id === id) rmSync(r.file, { force: true });
      rmSync(join(this.dir, 'images', `${id}.json`), { force: true });
      rmSync(img.rootfs, { recursive: true, force: true });
      removed.push(img.id);
    }
    this.collectBlobs();
    return removed;
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

  private async doPull(ref: ImageReference, canonical: string): Promise<StoredImage> {
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
    return this.install({ canonical, digest: m.digest, manifest, config, layerFiles: layers, size, what });
  }

  /** Builds the root (unless an image with this config exists) and records the name. Archives use it too. */
  async install(p: {
    canonical: string;
    digest: string;
    manifest: { config: Descriptor; layers: Descriptor[] };
    config: ImageConfig;
    layerFiles: string[];
    size: number;
    what: string;
    /** The workspace the name is recorded for (pulled or imported through the API). */
    workspace?: string;
  }): Promise<StoredImage> {
    const id = hex(p.manifest.config.digest);
    const rootfs = join(this.dir, 'roots', id);
    if (!existsSync(rootfs)) {
      const tmp = join(this.dir, 'roots', `.tmp-${randomBytes(6).toString('hex')}`);
      mkdirSync(tmp, { mode: 0o755 });
      try {
        for (const f of p.layerFiles) await this.applyFile(tmp, f, p.what);
        finishRoot(tmp);
        chmodSync(tmp, 0o755);
        if (existsSync(rootfs)) rmSync(tmp, { recursive: true, force: true });
        else renameSync(tmp, rootfs);
      } catch (e) {
        rmSync(tmp, { recursive: true, force: true });
        throw e;
      }
    }
    const prev = this.byId(id);
    const image: StoredImage = {
      id: p.manifest.config.digest,
      references: [...new Set([...(prev?.references ?? []), p.canonical])].sort(),
      digest: p.digest,
      layers: p.manifest.layers,
      config: p.config,
      size: p.size,
      rootfs,
      createdAt: prev?.createdAt ?? new Date().toISOString(),
    };
    writeAtomic(join(this.dir, 'images', `${id}.json`), JSON.stringify(image));
    // A name pulled again keeps the workspaces that hold it.
    const refFile = join(this.dir, 'refs', `${keyOf(p.canonical)}.json`);
    const held: string[] = existsSync(refFile)
      ? (JSON.parse(readFileSync(refFile, 'utf8')).workspaces ?? [])
      : [];
    const workspaces = [...new Set([...held, ...(p.workspace ? [p.workspace] : [])])];
    writeAtomic(refFile, JSON.stringify({ reference: p.canonical, id, workspaces }));
    return image;
  }

  private async applyFile(root: string, file: string, what: string): Promise<void> {
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
    const limits = { maxLayerBytes: this.opts.maxLayerBytes ?? DEFAULT_MAX_LAYER_BYTES };
    await applyLayer(root, createReadStream(file), isGzip(head), limits, what);
  }

  /** Deletes blobs no stored image names (a layer shared by two images stays while either does). */
  collectBlobs(): number {
    if (this.pulls.size > 0) return 0;
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

  /** Bytes used on disk by a root (files counted once per inode). */
  static diskBytes(dir: string): number {
    const seen = new Set<number>();
    let total = 0;
    const walk = (d: string) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        const p = join(d, e.name);
        const st = statSync(p, { throwIfNoEntry: false });
        if (!st || e.isSymbolicLink() || seen.has(st.ino)) continue;
        seen.add(st.ino);
        total += st.blocks * 512;
        if (e.isDirectory()) walk(p);
      }
    };
    walk(dir);
    return total;
  }
}

function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
}
