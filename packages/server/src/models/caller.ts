// Who calls a model endpoint: a Berth API key or JWT, in any header an OpenAI or Anthropic client (or the
// service's SDK) sends it in, checked against the workspace in the path. The key's id names the caller in
// usage records; it is looked up once per key and remembered. A resolved caller is reused for a second
// (docs/decisions/027-routing-hot-path.md): any change to an identity record drops them all at once.
import { type Access, type Authenticator, bearer } from '../auth/access.js';
import { looksLikeJwt, sha256 } from '../auth/credentials.js';
import { AUTH_KINDS, keys } from '../auth/records.js';
import type { Store } from '../store/store.js';

type Headers = Record<string, string | string[] | undefined>;

/** Key ids remembered per key (in memory only); bounded against floods of distinct keys. */
const KEY_IDS_MAX = 10_000;
/**
 * How long a resolved caller is reused without asking the authenticator (its hash and two lookups were ~4 % of
 * the gateway's CPU per call). Deleting a key, a service account or a membership drops every cached caller at
 * once (store watch); only what no write announces, a key's expiry time passing, can be late by up to this.
 */
export const CALLER_CACHE_TTL_MS = 1000;
/** Cached callers at most; bounded against floods of distinct valid credentials. */
const CALLERS_MAX = 10_000;

export interface Caller {
  access: Access;
  /** API key id (`ak-…`), or `jwt:<subject>` for a token. */
  keyId: string;
}

export class CallerResolver {
  private readonly keyIds = new Map<string, string>();
  /** Successes only: a refused credential is asked about again on every call. */
  private readonly callers = new Map<string, { caller: Caller; until: number }>();
  /** Bumped by every identity change: a resolution begun before it must not be cached. */
  private generation = 0;
  private readonly unwatch: () => void;
  private readonly now: () => number;

  constructor(
    private readonly authenticator: Authenticator,
    private readonly store: Store,
    now?: () => number,
  ) {
    this.now = now ?? Date.now;
    this.unwatch = store.watch((c) => {
      if (!AUTH_KINDS.has(c.object.kind)) return;
      this.generation++;
      this.callers.clear();
    });
  }

  close() {
    this.unwatch();
  }

  /** The caller resolved for these credential headers in the last second, without any await; else undefined. */
  cached(headers: Headers, workspace: string): Caller | undefined {
    const hit = this.callers.get(cacheKey(headers, workspace));
    if (!hit) return undefined;
    if (hit.until > this.now()) return hit.caller;
    this.callers.delete(cacheKey(headers, workspace));
    return undefined;
  }

  async resolve(headers: Headers, workspace: string): Promise<Caller> {
    const gen = this.generation;
    const caller = await this.resolveUncached(headers, workspace);
    if (gen === this.generation) {
      if (this.callers.size >= CALLERS_MAX) this.callers.clear();
      this.callers.set(cacheKey(headers, workspace), { caller, until: this.now() + CALLER_CACHE_TTL_MS });
    }
    return caller;
  }

  private async resolveUncached(headers: Headers, workspace: string): Promise<Caller> {
    // Only the credential headers, and the workspace of the address (never one the caller names).
    const h: Headers = {
      authorization: headers.authorization,
      'x-service-authorization': headers['x-service-authorization'],
      'x-blaxel-authorization': headers['x-blaxel-authorization'],
      'x-service-workspace': workspace,
    };
    // Anthropic clients send their key as x-api-key; the Authorization family wins when both are set.
    const xApiKey = headers['x-api-key'];
    if (!bearer(h) && typeof xApiKey === 'string' && xApiKey) h.authorization = `Bearer ${xApiKey}`;
    const access = await this.authenticator.resolve(h);
    return { access, keyId: await this.keyId(bearer(h)!, access) };
  }

  private async keyId(credential: string, access: Access): Promise<string> {
    if (access.principal.via === 'jwt' || looksLikeJwt(credential)) return `jwt:${access.principal.subject}`;
    // Keyed by the credential itself: one sha256 per call is the authenticator's, not a second one here.
    const known = this.keyIds.get(credential);
    if (known) return known;
    const hash = sha256(credential);
    const rec = await this.store.get(keys.apiKeyHash(hash));
    const id = typeof rec?.body.id === 'string' ? rec.body.id : `key:${hash.slice(0, 12)}`;
    if (this.keyIds.size >= KEY_IDS_MAX) this.keyIds.clear();
    this.keyIds.set(credential, id);
    return id;
  }
}

/** Every header a credential is read from, and the address's workspace: equal keys resolve alike. */
const cacheKey = (h: Headers, workspace: string) =>
  `${workspace}\u0000${h.authorization ?? ''}\u0000${h['x-service-authorization'] ?? ''}\u0000${h['x-blaxel-authorization'] ?? ''}\u0000${h['x-api-key'] ?? ''}`;
