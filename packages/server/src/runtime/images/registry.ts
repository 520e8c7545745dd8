// A Distribution (Docker Registry HTTP API v2) client for pulls: manifests and blobs, with the anonymous,
// bearer-token (WWW-Authenticate challenge) and basic schemes. Loopback registries are plain HTTP without any
// setting, as Docker does; other plain-HTTP registries must be listed (RegistryOptions.insecure). Every request
// (the token realm and each redirect to blob storage included) goes through the outbound client: a registry a
// member names is a destination it chooses, so a closed address is never contacted, mirrors included.
import type { Response } from 'undici';
import type { ImageReference } from '../../kinds/image-reference.js';
import { Outbound, OutboundRefused } from '../../outbound/index.js';
import { ImageError } from './errors.js';

export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface RegistryOptions {
  /** Credentials by registry host[:port] as written in references (`docker.io`, `127.0.0.1:5000`). */
  credentials?: Record<string, RegistryCredentials>;
  /** Hosts reached over plain HTTP although not loopback. */
  insecure?: string[];
  /** Host to contact instead, by registry (a pull-through mirror). */
  mirrors?: Record<string, string>;
  /** The outbound client requests go through; default: one that opens nothing. */
  outbound?: Outbound;
}

export const MANIFEST_TYPES = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
];
/** A manifest is small JSON; anything larger is not one (and would be held in memory). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** A registry that accepts the connection but never answers must not hold a sandbox's start for ever. */
const REQUEST_TIMEOUT_MS = 30_000;

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d+)?$/;

/** The failure of a request that never reached the registry: refused by the outbound rules, or unreachable. */
function unreached(e: unknown, what: string, whom: string): ImageError {
  const cause = (e as Error).cause ?? e;
  if (cause instanceof OutboundRefused)
    return new ImageError('REFUSED', `${what}: ${whom} is refused: ${cause.message}`);
  return new ImageError(
    'UNREACHABLE',
    `${what}: ${whom} is unreachable (${(cause as Error).message ?? cause})`,
  );
}

export class RegistryClient {
  private readonly tokens = new Map<string, string>();
  private readonly outbound: Outbound;
  constructor(private readonly opts: RegistryOptions = {}) {
    this.outbound = opts.outbound ?? new Outbound({ allowCidrs: [] });
  }

  private base(registry: string): string {
    const host =
      this.opts.mirrors?.[registry] ?? (registry === 'docker.io' ? 'registry-1.docker.io' : registry);
    const plain = LOOPBACK.test(host) || (this.opts.insecure ?? []).includes(host);
    return `${plain ? 'http' : 'https'}://${host}`;
  }

  /** GET with the registry's auth dance; `what` names the image in errors. */
  async get(ref: ImageReference, path: string, accept: string[], what: string): Promise<Response> {
    const url = `${this.base(ref.registry)}/v2/${ref.repository}/${path}`;
    const key = `${ref.registry}/${ref.repository}`;
    let auth = this.tokens.get(key);
    for (let attempt = 0; attempt < 2; attempt++) {
      let res: Response;
      try {
        res = await this.outbound.fetch(url, {
          headers: { accept: accept.join(', '), ...(auth ? { authorization: auth } : {}) },
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
      } catch (e) {
        throw unreached(e, what, `registry ${ref.registry}`);
      }
      if (res.status !== 401 || attempt === 1) return this.checked(res, ref, what, !!auth);
      await res.body?.cancel();
      auth = await this.authorize(res.headers.get('www-authenticate') ?? '', ref, what);
      this.tokens.set(key, auth);
    }
    throw new Error('unreachable');
  }

  private async checked(
    res: Response,
    ref: ImageReference,
    what: string,
    authed: boolean,
  ): Promise<Response> {
    if (res.ok) return res;
    await res.body?.cancel();
    if (res.status === 401 || res.status === 403)
      throw new ImageError(
        'UNAUTHORIZED',
        authed
          ? `${what}: registry ${ref.registry} refused the credentials (HTTP ${res.status})`
          : `${what}: registry ${ref.registry} needs credentials (HTTP ${res.status})`,
      );
    if (res.status === 404)
      throw new ImageError('NOT_FOUND', `${what}: not found in registry ${ref.registry}`);
    throw new ImageError('UNREACHABLE', `${what}: registry ${ref.registry} answered HTTP ${res.status}`);
  }

  /** Answers a 401 challenge: Basic with the configured credentials, or a Bearer token from the realm. */
  private async authorize(challenge: string, ref: ImageReference, what: string): Promise<string> {
    const creds = this.opts.credentials?.[ref.registry];
    const basic = creds
      ? `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`
      : undefined;
    const scheme = challenge.split(' ')[0].toLowerCase();
    if (scheme === 'basic') {
      if (!basic) throw new ImageError('UNAUTHORIZED', `${what}: registry ${ref.registry} needs credentials`);
      return basic;
    }
    if (scheme !== 'bearer')
      throw new ImageError(
        'UNAUTHORIZED',
        `${what}: registry ${ref.registry} asks for unsupported auth "${scheme}"`,
      );
    const params = Object.fromEntries(
      [...challenge.slice(6).matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1].toLowerCase(), m[2]]),
    );
    if (!params.realm)
      throw new ImageError('UNAUTHORIZED', `${what}: registry ${ref.registry} gave no token realm`);
    const u = new URL(params.realm);
    if (params.service) u.searchParams.set('service', params.service);
    u.searchParams.set('scope', params.scope ?? `repository:${ref.repository}:pull`);
    let res: Response;
    try {
      res = await this.outbound.fetch(u, {
        headers: basic ? { authorization: basic } : {},
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (e) {
      throw unreached(e, what, `token service ${u.host}`);
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new ImageError(
        'UNAUTHORIZED',
        `${what}: token service ${u.host} refused ${basic ? 'the credentials' : 'anonymous access'} (HTTP ${res.status})`,
      );
    }
    const body = (await res.json()) as { token?: string; access_token?: string };
    const token = body.token ?? body.access_token;
    if (!token) throw new ImageError('UNAUTHORIZED', `${what}: token service ${u.host} returned no token`);
    return `Bearer ${token}`;
  }
}

/** Reads a response body up to `max` bytes (a manifest or config), refusing more. */
export async function readCapped(res: Response, max: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of res.body ?? []) {
    n += c.length;
    if (n > max) throw new ImageError('TOO_LARGE', `${what}: larger than ${max} bytes`);
    chunks.push(Buffer.from(c));
  }
  return Buffer.concat(chunks);
}
