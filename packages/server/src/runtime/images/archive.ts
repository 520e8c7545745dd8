// Imports image archives for machines without registry access: `docker save` tarballs (manifest.json; Docker 25+
// writes an OCI layout beside it) and OCI image layouts (index.json + blobs/) packed as tar. The archive is
// unpacked into a private temporary directory (regular files only, names checked as in layers), every blob is
// verified into the blob store, and the image is installed under each name the archive carries (or `name`), for the
// importing workspace only: an import under a registry's name never changes what that name stands for elsewhere.
import { createHash, randomBytes } from 'node:crypto';
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { dirname, join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract } from 'tar-stream';
import { canonicalReference, parseImageReference } from '../../kinds/image-reference.js';
import { ImageError } from './errors.js';
import { DEFAULT_MAX_IMAGE_BYTES, type HeldImage, type ImageStore } from './image-store.js';
import { configOf, hostArchitecture, isIndex, manifestOf, parseJson, pickPlatform } from './manifest.js';

/** Symlink hops followed inside an archive (older `docker save` links duplicate layers). */
const MAX_HOPS = 8;

interface Unpacked {
  dir: string;
  links: Map<string, string>;
}

async function unpackArchive(input: Readable, dir: string, maxBytes: number): Promise<Unpacked> {
  const links = new Map<string, string>();
  const ex = extract();
  const feeding = pipeline(input, ex);
  feeding.catch(() => undefined);
  let total = 0;
  try {
    for await (const entry of ex) {
      const h = entry.header;
      const name = posix.normalize(h.name).replace(/^\.\//, '').replace(/\/$/, '');
      if (name.startsWith('/') || name.split('/').includes('..'))
        throw new ImageError('UNSAFE_LAYER', `archive entry ${JSON.stringify(h.name)} leaves the archive`);
      if (h.type === 'file') {
        total += h.size ?? 0;
        if (total > maxBytes)
          throw new ImageError('TOO_LARGE', `the archive is larger than ${maxBytes} bytes`);
        mkdirSync(dirname(join(dir, name)), { recursive: true, mode: 0o700 });
        await pipeline(entry, createWriteStream(join(dir, name), { mode: 0o600, flags: 'wx' }));
        continue;
      }
      if (h.type === 'symlink' && h.linkname)
        links.set(name, posix.normalize(posix.join(posix.dirname(name), h.linkname)));
      entry.resume();
    }
    await feeding;
  } catch (e) {
    input.destroy();
    if (e instanceof ImageError) throw e;
    throw new ImageError('CORRUPT', `the archive is not a readable tar file (${(e as Error).message})`);
  }
  return { dir, links };
}

function fileIn(u: Unpacked, name: string): string {
  let n = posix.normalize(name).replace(/^\.\//, '');
  for (let i = 0; i < MAX_HOPS && u.links.has(n); i++) n = u.links.get(n) as string;
  if (n.startsWith('/') || n.split('/').includes('..') || !existsSync(join(u.dir, n)))
    throw new ImageError('CORRUPT', `the archive names ${JSON.stringify(name)} but does not hold it`);
  return join(u.dir, n);
}

async function sha256Of(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file)) h.update(c);
  return `sha256:${h.digest('hex')}`;
}

function nameOf(n: string, what: string): string {
  const p = parseImageReference(n);
  if (!p.ok) throw new ImageError('INVALID_REFERENCE', `${what}: ${p.reason}`);
  return canonicalReference(p.ref);
}

export function importArchive(
  store: ImageStore,
  workspace: string,
  input: Readable,
  name?: string,
): Promise<HeldImage[]> {
  return store.writing(() => importInto(store, workspace, input, name));
}

async function importInto(
  store: ImageStore,
  workspace: string,
  input: Readable,
  name?: string,
): Promise<HeldImage[]> {
  const maxBytes = store.opts.maxImageBytes ?? DEFAULT_MAX_IMAGE_BYTES;
  const dir = join(store.dir, 'tmp', `import-${randomBytes(6).toString('hex')}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    const u = await unpackArchive(input, dir, maxBytes);
    const out: HeldImage[] = [];
    const arch = store.opts.architecture ?? hostArchitecture();
    const put = async (file: string, digest?: string) => {
      const d = digest ?? (await sha256Of(file));
      if (!store.blobs.has(d))
        await store.blobs.write(createReadStream(file), d, statSync(file).size, 'archive');
      return { digest: d, path: store.blobs.path(d) };
    };
    if (existsSync(join(dir, 'index.json'))) {
      const blob = (d: string) => fileIn(u, `blobs/sha256/${d.slice(7)}`);
      const index = parseJson(readFileSync(join(dir, 'index.json')), 'archive index.json');
      for (const entry of index.manifests ?? []) {
        const ann = entry.annotations ?? {};
        // ref.name is often a bare tag (skopeo, umoci): then only a given name says what the image is.
        const refName: string | undefined = ann['org.opencontainers.image.ref.name'];
        const given =
          name ?? ann['io.containerd.image.name'] ?? (refName && /[/:]/.test(refName) ? refName : undefined);
        if (!given)
          throw new ImageError(
            'INVALID_REFERENCE',
            'the archive does not name its image: give a name to import it as',
          );
        const what = `image ${nameOf(given, 'archive')}`;
        let m = entry;
        let doc = parseJson(readFileSync(blob(m.digest)), what);
        if (isIndex(doc, m.mediaType ?? null)) {
          m = pickPlatform(doc, arch, what);
          doc = parseJson(readFileSync(blob(m.digest)), what);
        }
        const manifest = manifestOf(doc, what);
        const cfg = await put(blob(manifest.config.digest), manifest.config.digest);
        const config = configOf(parseJson(readFileSync(cfg.path), what), arch, what);
        const layerFiles = [];
        for (const l of manifest.layers) layerFiles.push((await put(blob(l.digest), l.digest)).path);
        const size = manifest.layers.reduce((s, l) => s + l.size, 0);
        out.push(
          await store.install({
            canonical: nameOf(given, 'archive'),
            digest: m.digest,
            manifest,
            config,
            layerFiles,
            size,
            what,
            workspace,
          }),
        );
      }
    } else if (existsSync(join(dir, 'manifest.json'))) {
      const list = parseJson(readFileSync(join(dir, 'manifest.json')), 'archive manifest.json');
      for (const item of Array.isArray(list) ? list : []) {
        const names: string[] = name ? [name] : (item.RepoTags ?? []);
        if (names.length === 0)
          throw new ImageError(
            'INVALID_REFERENCE',
            'the archive does not name its image: give a name to import it as',
          );
        const what = `image ${nameOf(names[0], 'archive')}`;
        const cfg = await put(fileIn(u, item.Config));
        const config = configOf(parseJson(readFileSync(cfg.path), what), arch, what);
        const layers = [];
        for (const l of item.Layers ?? []) {
          const b = await put(fileIn(u, l));
          layers.push({ digest: b.digest, size: statSync(b.path).size, path: b.path });
        }
        const manifest = {
          config: { digest: cfg.digest, size: statSync(cfg.path).size },
          layers: layers.map(({ digest, size }) => ({ digest, size })),
        };
        const size = layers.reduce((s, l) => s + l.size, 0);
        for (const n of names)
          out.push(
            await store.install({
              canonical: nameOf(n, 'archive'),
              digest: cfg.digest,
              manifest,
              config,
              layerFiles: layers.map((l) => l.path),
              size,
              what,
              workspace,
            }),
          );
      }
    } else
      throw new ImageError(
        'CORRUPT',
        'not an image archive: no index.json (OCI layout) or manifest.json (docker save)',
      );
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
