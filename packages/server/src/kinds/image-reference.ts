// OCI/Docker image references (`python:3.12-slim`, `ghcr.io/org/app@sha256:…`): the grammar of the reference
// package of the Distribution project, with Docker's defaults (registry docker.io, namespace `library/`, tag
// `latest`). Pure and here rather than in the runtime's image store because spec validation (a 422 at create)
// needs it as much as the puller does.

export interface ImageReference {
  /** Registry host[:port] as written, `docker.io` when none was. */
  registry: string;
  /** Repository path inside the registry (`library/python`). */
  repository: string;
  tag?: string;
  /** `sha256:<64 hex>`. */
  digest?: string;
}

export type ParsedReference = { ok: true; ref: ImageReference } | { ok: false; reason: string };

export const DEFAULT_REGISTRY = 'docker.io';
const DEFAULT_TAG = 'latest';
/** The Distribution project's bound on a repository name (host included). */
const MAX_NAME_LENGTH = 255;

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const DIGEST = /^sha256:[a-f0-9]{64}$/;
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

export function parseImageReference(input: string): ParsedReference {
  const fail = (reason: string): ParsedReference => ({
    ok: false,
    reason: `${JSON.stringify(input)} is not an image reference: ${reason}`,
  });
  if (input !== input.trim() || input === '') return fail('empty or surrounded by blanks');
  let rest = input;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) return fail('a digest is sha256: and 64 lowercase hex digits');
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) return fail('a tag is up to 128 letters, digits, _ . - (not starting with . or -)');
  }
  if (rest.length > MAX_NAME_LENGTH) return fail(`the name is longer than ${MAX_NAME_LENGTH} characters`);
  const parts = rest.split('/');
  let registry = DEFAULT_REGISTRY;
  // Docker's rule: the first part names a registry when it has a dot or a port, or is localhost.
  if (parts.length > 1 && (/[.:]/.test(parts[0]) || parts[0] === 'localhost' || parts[0].startsWith('['))) {
    registry = parts.shift() as string;
    if (!HOST.test(registry)) return fail(`${JSON.stringify(registry)} is not a registry host[:port]`);
  }
  for (const p of parts)
    if (!COMPONENT.test(p))
      return fail(
        `${JSON.stringify(p)}: repository names are lowercase letters and digits, separated by . _ __ or -`,
      );
  if (registry === DEFAULT_REGISTRY && parts.length === 1) parts.unshift('library');
  return {
    ok: true,
    ref: { registry, repository: parts.join('/'), tag: tag ?? (digest ? undefined : DEFAULT_TAG), digest },
  };
}

/** The fully qualified form (`docker.io/library/python:3.12-slim`), one spelling per image. */
export function canonicalReference(ref: ImageReference): string {
  return `${ref.registry}/${ref.repository}${ref.tag ? `:${ref.tag}` : ''}${ref.digest ? `@${ref.digest}` : ''}`;
}

/** The name the service's SDK sends when a sandbox names no image: the host's own userland here. */
export const DEFAULT_IMAGE = 'blaxel/base-image:latest';
const DEFAULT_CANONICAL = 'docker.io/blaxel/base-image:latest';

/** True for no image at all and for every spelling of DEFAULT_IMAGE (they run the host-userland root). */
export function isDefaultImage(name: string | undefined): boolean {
  if (name === undefined || name === '') return true;
  const p = parseImageReference(name);
  return p.ok && canonicalReference(p.ref) === DEFAULT_CANONICAL;
}
