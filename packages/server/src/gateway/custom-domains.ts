// A request whose Host is a custom domain (decision 055): it goes to the application whose spec.urls names the
// domain, or the preview whose spec.customDomain does (an exact lookup of `url:<domain>` in the address table), the
// whole URL being the path it sees. Whether the domain is verified, and the object's workspace may use it, is judged
// when it is admitted (`admitDomain`, per request), off the parse.
import { ApiError } from '../errors.js';
import type { ResourceKey, Store } from '../store/store.js';
import { appUrlLabel, CUSTOM_DOMAIN_KIND, domainLabel } from '../kinds/custom-domain.js';
import type { PreviewAddress } from './address.js';
import type { WorkloadAddress } from './workload-address.js';

export function matchCustomDomain(
  host: string | undefined,
  url: string,
  labels: { resolve(label: string): ResourceKey | undefined },
): WorkloadAddress | undefined {
  if (!host) return undefined;
  const name = host.replace(/:\d+$/, '').toLowerCase().replace(/\.$/, '');
  if (!name.includes('.')) return undefined;
  const app = labels.resolve(appUrlLabel(name));
  if (app?.kind !== 'Application') return undefined;
  return {
    kind: 'Application',
    workspace: app.workspace,
    name: app.name,
    rest: url.startsWith('/') ? url : `/${url}`,
    domain: name,
  };
}

/** The preview whose spec.customDomain is the request's Host, if one holds it (its own host form: base '/'). */
export function matchPreviewDomain(
  host: string | undefined,
  url: string,
  labels: { resolve(label: string): ResourceKey | undefined },
): PreviewAddress | undefined {
  if (!host) return undefined;
  const name = host.replace(/:\d+$/, '').toLowerCase().replace(/\.$/, '');
  if (!name.includes('.')) return undefined;
  const owner = labels.resolve(appUrlLabel(name));
  if (owner?.kind !== 'Preview') return undefined;
  return {
    workspace: owner.workspace,
    sandbox: owner.parent,
    preview: owner.name,
    rest: url.startsWith('/') ? url : `/${url}`,
    base: '/',
    domain: name,
  };
}

/** Refuses (404) a request that came by a domain the object's workspace may not use now (domainAllows). */
export async function admitDomain(
  store: Store,
  labels: { resolve(label: string): ResourceKey | undefined },
  domain: string | undefined,
  workspace: string,
): Promise<void> {
  if (domain !== undefined && !(await domainAllows(store, labels, domain, workspace)))
    throw new ApiError('NOT_FOUND', `no route for ${domain}: it is not a verified custom domain here`);
}

/**
 * Whether `domain` routes to an object of `workspace` now: the domain is verified (its label held) by that workspace,
 * or by one that shared it with `workspace` and whose offer it accepted (its copy of the record names the owner).
 */
export async function domainAllows(
  store: Store,
  labels: { resolve(label: string): ResourceKey | undefined },
  domain: string,
  workspace: string,
): Promise<boolean> {
  const owner = labels.resolve(domainLabel(domain));
  if (owner?.kind !== CUSTOM_DOMAIN_KIND) return false;
  if (owner.workspace === workspace) return true;
  const copy = await store.get({ kind: CUSTOM_DOMAIN_KIND, workspace, parent: '', name: domain });
  return copy?.body.metadata?.sharedFromWorkspace === owner.workspace;
}
