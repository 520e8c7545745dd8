// Manifests and configs as the store needs them: an index resolved to the host's platform, the layer list, and
// the parts of the image config a sandbox applies (Env, WorkingDir, User).
import { ImageError } from './errors.js';

export interface Descriptor {
  mediaType?: string;
  digest: string;
  size: number;
  platform?: { os?: string; architecture?: string; variant?: string };
}

export interface ImageManifest {
  config: Descriptor;
  layers: Descriptor[];
}

export interface ImageConfig {
  env: string[];
  workingDir?: string;
  user?: string;
  entrypoint?: string[];
  cmd?: string[];
}

const INDEX_TYPES = new Set([
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
]);

/** OCI architecture names of Node's process.arch values. */
const ARCH: Record<string, string> = {
  x64: 'amd64',
  arm64: 'arm64',
  arm: 'arm',
  ppc64: 'ppc64le',
  s390x: 's390x',
};
export const hostArchitecture = () => ARCH[process.arch] ?? process.arch;

export function parseJson(bytes: Buffer, what: string): any {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new ImageError('CORRUPT', `${what}: the registry sent a manifest that is not JSON`);
  }
}

export function isIndex(doc: any, contentType: string | null): boolean {
  return (
    INDEX_TYPES.has(doc?.mediaType) || INDEX_TYPES.has(contentType ?? '') || Array.isArray(doc?.manifests)
  );
}

/** The index entry for linux/`arch`, or an error listing the platforms the image has. */
export function pickPlatform(index: any, arch: string, what: string): Descriptor {
  const all: Descriptor[] = Array.isArray(index.manifests) ? index.manifests : [];
  const hit = all.find((m) => (m.platform?.os ?? 'linux') === 'linux' && m.platform?.architecture === arch);
  if (hit) return hit;
  const have = all
    .filter((m) => m.platform)
    .map((m) => `${m.platform?.os}/${m.platform?.architecture}`)
    .join(', ');
  throw new ImageError(
    'ARCHITECTURE',
    `${what}: no linux/${arch} image (the image has ${have || 'no platforms'})`,
  );
}

export function manifestOf(doc: any, what: string): ImageManifest {
  const ok = (d: any) => d && typeof d.digest === 'string' && Number.isSafeInteger(d.size) && d.size >= 0;
  if (doc?.schemaVersion === 1)
    throw new ImageError('UNSUPPORTED', `${what}: schema 1 manifests are not supported (re-push the image)`);
  if (!ok(doc?.config) || !Array.isArray(doc.layers) || !doc.layers.every(ok))
    throw new ImageError('CORRUPT', `${what}: the manifest has no valid config and layers`);
  return { config: doc.config, layers: doc.layers };
}

export function configOf(doc: any, arch: string, what: string): ImageConfig {
  if (doc?.architecture && doc.architecture !== arch)
    throw new ImageError(
      'ARCHITECTURE',
      `${what}: the image is for ${doc.os ?? 'linux'}/${doc.architecture}, this host runs linux/${arch}`,
    );
  const c = doc?.config ?? {};
  const strings = (v: unknown) =>
    Array.isArray(v) && v.every((s) => typeof s === 'string') ? (v as string[]) : undefined;
  return {
    env: strings(c.Env) ?? [],
    workingDir: typeof c.WorkingDir === 'string' && c.WorkingDir ? c.WorkingDir : undefined,
    user: typeof c.User === 'string' && c.User ? c.User : undefined,
    entrypoint: strings(c.Entrypoint),
    cmd: strings(c.Cmd),
  };
}
