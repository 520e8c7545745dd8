// Who calls a model endpoint: a Berth API key or JWT, in any header an OpenAI or Anthropic client (or the
// service's SDK) sends it in, checked against the workspace in the path. The key's id names the caller in
// usage records; it is looked up once per key and remembered.
import { type Access, type Authenticator, bearer } from '../auth/access.js';
import { looksLikeJwt, sha256 } from '../auth/credentials.js';
import { keys } from '../auth/records.js';
import type { Store } from '../store/store.js';

type Headers = Record<string, string | string[] | undefined>;

/** Key ids remembered per key (in memory only); bounded against floods of distinct keys. */
const KEY_IDS_MAX = 10_000;

export interface Caller {
  access: Access;
  /** API key id (`ak-…`), or `jwt:<subject>` for a token. */
  keyId: string;
}

export class CallerResolver {
  private readonly keyIds = new Map<string, string>();

  constructor(
    private readonly authenticator: Authenticator,
    private readonly store: Store,
  ) {}

  async resolve(headers: Headers, workspace: string): Promise<Caller> {
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
