// The token endpoint on the wire (RFC 6749 §4.1.3, §6): a form-encoded POST through the outbound module, the client
// authenticated as its provider expects, and the answer sorted into a token, a refusal the user must act on, or a
// failure worth trying again.
import type { ClientAuth } from '../kinds/oauth2.js';
import type { Outbound } from '../outbound/index.js';

/** A token endpoint that has not answered within this long is a transient failure (tried again, never hung on). */
export const TOKEN_REQUEST_TIMEOUT_MS = 15_000;
/** Largest token response read: a few KB in practice; more is not a token endpoint. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** What a successful grant answers. */
export interface Grant {
  accessToken: string;
  tokenType: string;
  /** Seconds the access token lives, as the provider said (undefined: it did not say). */
  expiresIn?: number;
  /** A new refresh token (rotation, or the first one of a code exchange). */
  refreshToken?: string;
  scope?: string;
  /** The ID token of an OpenID provider's code exchange, for the caller to read the user's identity. */
  idToken?: string;
}

/**
 * The provider refused the grant (RFC 6749 §5.2): `invalid_grant` (revoked, expired, reused), `invalid_client`,
 * `unauthorized_client`, `invalid_scope`... Trying again does not help; the user or the tenant must act.
 */
export class GrantRefused extends Error {
  override name = 'GrantRefused';
  constructor(
    readonly error: string,
    readonly description: string | undefined,
    readonly status: number,
  ) {
    super(description ? `${error}: ${description}` : error);
  }
}

/** The endpoint could not be reached or answered something else than a grant or a refusal: try again later. */
export class TokenEndpointError extends Error {
  override name = 'TokenEndpointError';
}

export interface ClientCredentials {
  clientId: string;
  clientSecret?: string;
  clientAuth: ClientAuth;
}

/** Posts one grant to `tokenUrl` and reads the answer. */
export async function requestGrant(
  outbound: Pick<Outbound, 'fetch'>,
  tokenUrl: string,
  client: ClientCredentials,
  params: Record<string, string>,
): Promise<Grant> {
  const form = new URLSearchParams(params);
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  if (client.clientAuth === 'client_secret_basic' && client.clientSecret !== undefined) {
    // RFC 6749 §2.3.1: each part form-encoded before the two are joined and base64-encoded.
    const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
    headers.authorization = `Basic ${Buffer.from(`${enc(client.clientId)}:${enc(client.clientSecret)}`).toString('base64')}`;
  } else {
    form.set('client_id', client.clientId);
    if (client.clientSecret !== undefined) form.set('client_secret', client.clientSecret);
  }
  let res: Awaited<ReturnType<Outbound['fetch']>>;
  let text: string;
  try {
    res = await outbound.fetch(tokenUrl, {
      method: 'POST',
      headers,
      body: form.toString(),
      redirect: 'manual',
      signal: AbortSignal.timeout(TOKEN_REQUEST_TIMEOUT_MS),
    });
    text = await readCapped(res);
  } catch (err) {
    throw new TokenEndpointError(`the token endpoint could not be reached: ${(err as Error).message}`);
  }
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (res.ok && typeof body?.access_token === 'string' && body.access_token) {
    const expiresIn = Number(body.expires_in);
    return {
      accessToken: body.access_token,
      tokenType: typeof body.token_type === 'string' ? body.token_type : 'Bearer',
      expiresIn: Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : undefined,
      refreshToken:
        typeof body.refresh_token === 'string' && body.refresh_token ? body.refresh_token : undefined,
      scope: typeof body.scope === 'string' ? body.scope : undefined,
      idToken: typeof body.id_token === 'string' ? body.id_token : undefined,
    };
  }
  // §5.2: a 400 (or 401 for client authentication) with an `error` code is the provider's refusal.
  if ((res.status === 400 || res.status === 401) && typeof body?.error === 'string')
    throw new GrantRefused(
      body.error,
      typeof body.error_description === 'string' ? body.error_description : undefined,
      res.status,
    );
  throw new TokenEndpointError(
    `the token endpoint answered ${res.status}${typeof body?.error === 'string' ? ` (${body.error})` : ''}`,
  );
}

async function readCapped(res: Response | Awaited<ReturnType<Outbound['fetch']>>): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const parts: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > MAX_RESPONSE_BYTES) {
      await reader.cancel();
      throw new Error(`the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}
