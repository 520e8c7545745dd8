// Who is calling and what they may do in the workspace they address.
import type { Role } from '../kinds/types.js';

export interface Principal {
  /** Service account client ID or user subject. */
  subject: string;
  subType: 'user' | 'service_account';
  /** The workspace the credential belongs to; used when a request names none. */
  homeWorkspace: string;
  via: 'api_key' | 'jwt';
  /** A job execution's task credential: it reads that execution only (auth/execution-scope.ts). */
  scope?: ExecutionScope;
}

export interface ExecutionScope {
  job: string;
  execution: string;
}

/** What a request asks for: a scoped credential is refused unless its scope allows this. */
export interface Route {
  method: string;
  path: string;
}

export interface Access {
  principal: Principal;
  workspace: string;
  role: Role;
}

const RANK: Record<Role, number> = { viewer: 0, member: 1, admin: 2 };

export const atLeast = (have: Role, need: Role) => RANK[have] >= RANK[need];

/** Resolves the caller of a request. Throws ApiError 401 (no or bad credential) or 403/404 (workspace). */
export interface Authenticator {
  /** Without `route` (the gateways), a scoped credential is refused: it reads its own execution, nothing else. */
  resolve(headers: Record<string, string | string[] | undefined>, route?: Route): Promise<Access>;
  /**
   * What `resolve` would answer, when it can be told from the caches alone (a fresh credential and role, unscoped);
   * undefined otherwise, and then `resolve` decides. Saves the API's hook a promise per request (decision 066).
   */
  resolveCached?(headers: Record<string, string | string[] | undefined>): Access | undefined;
  /** Same, but only the principal: for calls that do not address a workspace (e.g. creating one). */
  principal(headers: Record<string, string | string[] | undefined>): Promise<Principal>;
}

/** Header aliases of DESIGN.md §4: the specification's X-Service-*, the SDK's X-Blaxel-*. */
export function header(headers: Record<string, string | string[] | undefined>, ...names: string[]) {
  for (const n of names) {
    const v = headers[n.toLowerCase()];
    if (typeof v === 'string' && v) return v;
    if (Array.isArray(v) && v[0]) return v[0];
  }
  return undefined;
}

export const workspaceHeader = (h: Record<string, string | string[] | undefined>) =>
  header(h, 'x-service-workspace', 'x-blaxel-workspace');

/** The bearer credential: Authorization first, then the inference aliases. */
export function bearer(h: Record<string, string | string[] | undefined>) {
  const v = header(h, 'authorization', 'x-service-authorization', 'x-blaxel-authorization');
  if (!v) return undefined;
  const m = /^Bearer\s+(.+)$/i.exec(v.trim());
  return m ? m[1].trim() : undefined;
}
