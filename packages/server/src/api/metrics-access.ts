// Who reads which series of /metrics. Series labelled with a workspace (sandboxes, model calls) name tenants'
// workspaces, sandboxes, models and keys, so a scrape sees them only as its bearer credential allows:
//   none                            the process and HTTP series only, which name no tenant
//   the operator's metrics token    every series (BERTH_METRICS_TOKEN: the operator's Prometheus)
//   an API key or token of Berth's  also the series of each workspace its principal is a member of (any role:
//                                   a viewer reads the same sandboxes through the API)
// A credential that is not valid is a 401, never a quietly smaller answer.
import { createHash, timingSafeEqual } from 'node:crypto';
import { type Authenticator, bearer } from '../auth/access.js';
import { workspacesOf } from '../auth/records.js';
import type { Store } from '../store/store.js';

/** Whether a scrape may see the series of a workspace. */
export type WorkspaceFilter = (workspace: string) => boolean;

export type MetricsAccess = (
  headers: Record<string, string | string[] | undefined>,
) => Promise<WorkspaceFilter>;

const digest = (s: string) => createHash('sha256').update(s).digest();

export function metricsAccess(deps: {
  token?: string;
  authenticator: Authenticator;
  store: Store;
}): MetricsAccess {
  const token = deps.token === undefined ? undefined : digest(deps.token);
  return async (headers) => {
    const cred = bearer(headers);
    if (!cred) return () => false;
    // Compared as digests: equal lengths, and no early exit on the first differing byte.
    if (token && timingSafeEqual(digest(cred), token)) return () => true;
    const p = await deps.authenticator.principal(headers);
    const mine = new Set(await workspacesOf(deps.store, p.subject));
    return (ws) => mine.has(ws);
  };
}
