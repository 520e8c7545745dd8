// Previews (§2.7): one port of a sandbox published at an address of its own (address.ts), open to anyone (public)
// or to holders of a preview token. Once admitted, the request goes the way of `/port/{n}`.
import type { IncomingMessage } from 'node:http';
import { ApiError } from '../errors.js';
import { verifyPreviewToken } from '../auth/preview-token.js';
import type { Authenticator } from '../auth/access.js';
import { previewExpiresAtMs } from '../kinds/preview.js';
import { isGone } from '../kinds/status.js';
import type { HostLabelIndex } from '../store/host-labels.js';
import type { Store } from '../store/store.js';
import { PREVIEW_LABEL_PREFIX, type PreviewAddress } from './address.js';
import { authorize, CREDENTIAL_HEADERS, PREVIEW_TOKEN_COOKIE, PREVIEW_TOKEN_HEADERS } from './auth.js';

/**
 * The port that stands for the sandbox API itself (443, the service's convention): the SDK's sessions are private
 * previews of it, and talk to the daemon (processes, files, logs, watch) with the preview token alone.
 */
export const SANDBOX_API_PREVIEW_PORT = 443;

/** A private preview's token may come in a header (PREVIEW_TOKEN_HEADERS), this query parameter, or the cookie. */
export const TOKEN_QUERY = 'bl_preview_token';

const bareHost = (host: string | undefined) => {
  if (!host) return '';
  const colon = host.lastIndexOf(':');
  return (colon > host.lastIndexOf(']') && colon >= 0 ? host.slice(0, colon) : host).toLowerCase();
};

/**
 * Host label → preview, for the host form: an exact lookup in the address table (store/host-labels.ts), where a
 * preview's label is claimed with its create. Custom domains are not served: without proof of ownership a member
 * could name the server's own host and take its traffic.
 */
export class PreviewHosts {
  constructor(
    private readonly labels: HostLabelIndex,
    private readonly inferenceHost: string | undefined,
  ) {}

  /** The preview a Host names (`pv-<id>.<region>.<inference_host>`), if any. */
  match(host: string | undefined, url: string): PreviewAddress | undefined {
    // Asked for every request the gateway sees (models and the API too): without an inference host, nothing.
    if (!this.inferenceHost) return undefined;
    const bare = bareHost(host);
    if (!bare.startsWith(PREVIEW_LABEL_PREFIX)) return undefined;
    if (!bare.endsWith(`.${this.inferenceHost.toLowerCase()}`)) return undefined;
    const owner = this.labels.resolve(bare.slice(0, bare.indexOf('.')));
    if (owner?.kind !== 'Preview') return undefined;
    const key = { workspace: owner.workspace, sandbox: owner.parent, preview: owner.name };
    return { ...key, rest: url.startsWith('/') ? url : `/${url}`, base: '/' };
  }
}

function cookieToken(req: IncomingMessage): string | undefined {
  const raw = req.headers.cookie;
  if (!raw) return undefined;
  for (const part of raw.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === PREVIEW_TOKEN_COOKIE)
      return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** The rest without the token query parameter (the application never sees it), and the token if present. */
export function takeQueryToken(rest: string): { rest: string; token?: string } {
  const q = rest.indexOf('?');
  if (q < 0) return { rest };
  const params = new URLSearchParams(rest.slice(q + 1));
  const token = params.get(TOKEN_QUERY) ?? undefined;
  if (token === undefined) return { rest };
  params.delete(TOKEN_QUERY);
  const query = params.toString();
  return { rest: rest.slice(0, q) + (query ? `?${query}` : ''), token };
}

export interface AdmittedPreview {
  port: number;
  rest: string;
  requestHeaders: Record<string, string>;
  responseHeaders: Record<string, string>;
  /** The preview's path prefix, to which its cookies are kept ('/' for a host of its own). */
  cookieScope: string;
}

/**
 * Checks that the preview exists, has not expired, and that the caller may open it: anyone when public; else a
 * valid preview token (header, query or cookie) or a credential of a workspace member. A token that came in the
 * query is answered with a cookie, so the pages and assets a browser loads next are let in too.
 */
export async function admitPreview(
  deps: { store: Store; authenticator: Authenticator; now: () => number },
  req: IncomingMessage,
  a: PreviewAddress,
): Promise<AdmittedPreview> {
  const o = await deps.store.get({
    kind: 'Preview',
    workspace: a.workspace,
    parent: a.sandbox,
    name: a.preview,
  });
  // By its own host (a hash of the names) or its prefix path, a refusal names neither the preview nor its sandbox.
  const byHost = a.base === '/' || a.prefixed === true;
  const what = byHost
    ? 'this preview'
    : `preview ${JSON.stringify(a.preview)} of sandbox ${JSON.stringify(a.sandbox)}`;
  if (!o || isGone(o)) throw new ApiError('NOT_FOUND', `${what} not found`);
  const expiresAt = previewExpiresAtMs(o.body);
  if (expiresAt !== undefined && expiresAt <= deps.now())
    throw new ApiError('NOT_FOUND', `${what} has expired`);
  const spec = o.body.spec;
  const { rest, token: queryToken } = takeQueryToken(a.rest);
  const responseHeaders: Record<string, string> = { ...(spec.responseHeaders ?? {}) };
  if (!spec.public) {
    const headerToken = PREVIEW_TOKEN_HEADERS.map((h) => req.headers[h]).find((v) => typeof v === 'string');
    const token = (headerToken as string | undefined) ?? queryToken ?? cookieToken(req);
    const valid =
      token !== undefined &&
      (await verifyPreviewToken(deps.store, a.workspace, a.sandbox, a.preview, token, deps.now()));
    if (!valid) {
      if (token === undefined && CREDENTIAL_HEADERS.some((h) => req.headers[h]))
        await authorize(deps.authenticator, req.headers, a.workspace, byHost ? what : undefined);
      else
        throw new ApiError(
          'UNAUTHENTICATED',
          token === undefined
            ? `${what} is private: send a preview token (X-Blaxel-Preview-Token header or ${TOKEN_QUERY} query)`
            : `the preview token is not valid for ${what} (unknown, expired, or of another preview)`,
        );
    }
    if (valid && queryToken !== undefined)
      responseHeaders['set-cookie'] =
        `${PREVIEW_TOKEN_COOKIE}=${encodeURIComponent(queryToken)}; Path=${a.base}; HttpOnly; SameSite=Lax`;
  }
  return {
    port: spec.port,
    rest,
    requestHeaders: spec.requestHeaders ?? {},
    responseHeaders,
    cookieScope: a.base,
  };
}
