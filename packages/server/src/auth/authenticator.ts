// Resolves a request's credential (API key or JWT) to a principal, and the addressed workspace to a role.
// Hot path: an API key is one sha256 and one store get; both lookups are cached for a few seconds (a cached key
// costs neither, and `resolveCached` answers it without a promise) and the caches are dropped on any change to an
// identity record, so a deleted key stops working at once.
import { ApiError } from '../errors.js';
import type { Role } from '../kinds/types.js';
import type { Store } from '../store/store.js';
import { type Access, type Authenticator, bearer, type Principal, workspaceHeader } from './access.js';
import { looksLikeJwt, sha256 } from './credentials.js';
import { AUTH_KINDS, type ApiKeyHashRecord, keys, type MemberRecord } from './records.js';
import { SCOPED_ONLY, scopeAllows } from './execution-scope.js';
import type { SigningKey } from './signing-key.js';

/** How long a resolved credential or role is reused without a store read; changes invalidate sooner. */
export const AUTH_CACHE_TTL_MS = 5000;
/** Bounds memory when many distinct credentials arrive (e.g. a flood of bad keys). */
const CACHE_MAX = 10_000;

type Headers = Record<string, string | string[] | undefined>;

interface CachedPrincipal {
  principal: Principal | undefined;
  until: number;
  /** Epoch ms when the credential itself expires. */
  expiresAt?: number;
}

export interface AuthenticatorImpl extends Authenticator {
  resolveCached(headers: Headers): Access | undefined;
  /** The role of a principal in a workspace; 404 when it does not exist or the principal is not a member. */
  accessIn(principal: Principal, workspace: string): Promise<Access>;
  /** Drops every cached lookup (the store watch does this on identity changes). */
  invalidate(): void;
  close(): void;
}

const unauthenticated = (detail: string) =>
  new ApiError('UNAUTHENTICATED', detail, { headers: { 'www-authenticate': 'Bearer realm="berth"' } });

export function createAuthenticator(deps: {
  store: Store;
  signingKey: SigningKey;
  issuer: () => string;
  now?: () => number;
}): AuthenticatorImpl {
  const { store, signingKey } = deps;
  const now = deps.now ?? Date.now;
  const principals = new Map<string, CachedPrincipal>();
  const roles = new Map<string, { role: Role | undefined; until: number }>();

  const unwatch = store.watch((c) => {
    if (AUTH_KINDS.has(c.object.kind)) invalidate();
  });

  // Bumped by every invalidation: a lookup that read the store before a change must not cache its answer.
  let generation = 0;
  function invalidate() {
    generation++;
    principals.clear();
    roles.clear();
  }

  function remember<V>(map: Map<string, V>, k: string, v: V, readAt: number) {
    if (readAt !== generation) return;
    if (map.size >= CACHE_MAX) map.clear();
    map.set(k, v);
  }

  async function fromApiKey(key: string): Promise<CachedPrincipal> {
    const rec = await store.get(keys.apiKeyHash(sha256(key)));
    if (!rec) return { principal: undefined, until: now() + AUTH_CACHE_TTL_MS };
    const b = rec.body as ApiKeyHashRecord;
    return {
      principal: {
        subject: b.sub,
        subType: b.subType,
        homeWorkspace: b.workspace,
        via: 'api_key',
        ...(b.scope ? { scope: b.scope } : {}),
      },
      until: now() + AUTH_CACHE_TTL_MS,
      expiresAt: b.expiresAt,
    };
  }

  async function fromJwt(token: string): Promise<CachedPrincipal> {
    let claims: Awaited<ReturnType<SigningKey['verify']>>;
    try {
      claims = await signingKey.verify(token, deps.issuer());
    } catch {
      return { principal: undefined, until: now() + AUTH_CACHE_TTL_MS };
    }
    // A token outlives nothing: once its service account is gone, so is the token.
    const sa = await store.get(keys.clientId(claims.sub));
    const expiresAt = (claims.exp ?? 0) * 1000;
    if (!sa) return { principal: undefined, until: now() + AUTH_CACHE_TTL_MS, expiresAt };
    return {
      principal: {
        subject: claims.sub,
        subType: 'service_account',
        homeWorkspace: claims.workspace,
        via: 'jwt',
      },
      until: now() + AUTH_CACHE_TTL_MS,
      expiresAt,
    };
  }

  // Keyed by the credential itself, as tokens already were: a hit costs no sha256 (decision 052). The map
  // lives in this process only, is bounded (CACHE_MAX) and emptied by every identity change. Whether a credential
  // is read as a token or a key follows from its text alone (`looksLikeJwt`), so the text is the whole key.
  const roleKeyOf = (subject: string, workspace: string) => `${subject}\u0000${workspace}`;
  const fresh = <V extends { until: number }>(hit: V | undefined, t: number) =>
    hit && hit.until > t ? hit : undefined;

  async function principal(headers: Headers): Promise<Principal> {
    const cred = bearer(headers);
    if (!cred)
      throw unauthenticated('a bearer credential is required (Authorization: Bearer <API key or token>)');
    const jwt = looksLikeJwt(cred);
    const t = now();
    let hit = fresh(principals.get(cred), t);
    if (!hit) {
      const gen = generation;
      hit = jwt ? await fromJwt(cred) : await fromApiKey(cred);
      remember(principals, cred, hit, gen);
    }
    if (!hit.principal)
      throw unauthenticated(jwt ? 'the token is invalid or expired' : 'the API key is not valid');
    if (hit.expiresAt !== undefined && hit.expiresAt <= t)
      throw unauthenticated(jwt ? 'the token is invalid or expired' : 'the API key has expired');
    return hit.principal;
  }

  async function accessIn(p: Principal, workspace: string): Promise<Access> {
    if (p.scope) throw new ApiError('FORBIDDEN', SCOPED_ONLY);
    const rk = roleKeyOf(p.subject, workspace);
    const t = now();
    let hit = fresh(roles.get(rk), t);
    if (!hit) {
      const gen = generation;
      const m = await store.get(keys.member(workspace, p.subject));
      hit = { role: (m?.body as MemberRecord | undefined)?.role, until: t + AUTH_CACHE_TTL_MS };
      remember(roles, rk, hit, gen);
    }
    // Not a member and does not exist look the same, so workspaces cannot be enumerated.
    if (!hit.role) throw new ApiError('NOT_FOUND', `workspace ${workspace} not found`);
    return { principal: p, workspace, role: hit.role };
  }

  return {
    async principal(headers) {
      const p = await principal(headers);
      if (p.scope) throw new ApiError('FORBIDDEN', SCOPED_ONLY);
      return p;
    },
    accessIn,
    async resolve(headers, route) {
      const p = await principal(headers);
      const workspace = workspaceHeader(headers) ?? p.homeWorkspace;
      if (!p.scope) return accessIn(p, workspace);
      if (!route || !scopeAllows(p.scope, route)) throw new ApiError('FORBIDDEN', SCOPED_ONLY);
      if (workspace !== p.homeWorkspace) throw new ApiError('NOT_FOUND', `workspace ${workspace} not found`);
      return { principal: p, workspace, role: 'viewer' };
    },
    resolveCached(headers) {
      // Only a fresh, valid, unscoped credential whose role in the addressed workspace is cached too; anything else
      // (a miss, a refusal, a scoped credential) is left to `resolve`, which reads, refuses and words it.
      const cred = bearer(headers);
      if (!cred) return undefined;
      const t = now();
      const hit = fresh(principals.get(cred), t);
      const p = hit?.principal;
      if (!p || p.scope || (hit.expiresAt !== undefined && hit.expiresAt <= t)) return undefined;
      const workspace = workspaceHeader(headers) ?? p.homeWorkspace;
      const role = fresh(roles.get(roleKeyOf(p.subject, workspace)), t)?.role;
      return role ? { principal: p, workspace, role } : undefined;
    },
    invalidate,
    close: unwatch,
  };
}
