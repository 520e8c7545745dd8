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
  /** `8080/tcp`…: what the image says it listens on (shown; ports are declared on sandboxes and workloads). */
  exposedPorts?: string[];
  labels?: Record<string, string>;
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
    ...(c.ExposedPorts && typeof c.ExposedPorts === 'object'
      ? { exposedPorts: Object.keys(c.ExposedPorts).sort() }
      : {}),
    ...(c.Labels && typeof c.Labels === 'object'
      ? {
          labels: Object.fromEntries(
            Object.entries(c.Labels).filter((e): e is [string, string] => typeof e[1] === 'string'),
          ),
        }
      : {}),
  };
}

/**
 * An OCI image config for `config` over layers of these diff ids. No timestamps: the same build gives the same bytes,
 * so the same image id (a rebuild with nothing changed finds the image it made before).
 */
export function ociConfigBytes(
  config: ImageConfig,
  arch: string,
  diffIds: string[],
  history: Array<{ created_by: string; empty_layer?: boolean }>,
): Buffer {
  const c: Record<string, unknown> = { Env: config.env };
  if (config.workingDir) c.WorkingDir = config.workingDir;
  if (config.user) c.User = config.user;
  if (config.entrypoint) c.Entrypoint = config.entrypoint;
  if (config.cmd) c.Cmd = config.cmd;
  if (config.exposedPorts?.length)
    c.ExposedPorts = Object.fromEntries(config.exposedPorts.map((p) => [p, {}]));
  if (config.labels && Object.keys(config.labels).length) c.Labels = config.labels;
  return Buffer.from(
    JSON.stringify({
      architecture: arch,
      os: 'linux',
      config: c,
      rootfs: { type: 'layers', diff_ids: diffIds },
      history,
    }),
  );
}
