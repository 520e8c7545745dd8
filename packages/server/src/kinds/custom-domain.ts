// Custom domains (decision 055): a domain a workspace proves it controls with a DNS TXT record, then routes to its
// applications. Not a kind of the registry (a domain is no DNS label, which every object name is), but records of the
// store under the workspace, named by the domain; the rules shared by the API, the Application kind and the gateway.
import { randomBytes } from 'node:crypto';
import type { FieldIssue } from '../errors.js';
import type { ValidationContext } from './types.js';

/** The record kind of a workspace's custom domain (api/custom-domains.ts). */
export const CUSTOM_DOMAIN_KIND = 'CustomDomain';
/** The record kind of a pending or accepted offer of a domain to another workspace, under the domain. */
export const CUSTOM_DOMAIN_SHARE_KIND = 'CustomDomainShare';

/** Where the challenge is published: a TXT record at `_berth-challenge.<domain>`. */
export const challengeName = (domain: string) => `_berth-challenge.${domain}`;
export const challengeValue = (token: string) => `berth-domain-verification=${token}`;
export const newChallengeToken = () => randomBytes(24).toString('base64url');

/**
 * The address-table label a verified domain holds (the domain itself: Berth's own labels have no dot), so one domain
 * is verified by one workspace at a time, race-safe (store/host-labels.ts).
 */
export const domainLabel = (domain: string) => domain;
/** The label an application holds for each domain of its spec.urls: no two applications answer on one domain. */
export const appUrlLabel = (domain: string) => `url:${domain}`;

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Why `name` is not a domain a workspace may claim here; undefined when it is one. */
export function domainProblem(name: string, inferenceHost?: string): string | undefined {
  if (name.length > 253) return 'a domain name is at most 253 characters';
  if (name.startsWith('*.'))
    return 'wildcard domains are not served: claim each name (app.example.com) on its own';
  const labels = name.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l)))
    return 'must be a lowercase domain name of two labels or more, like app.example.com';
  if (/^\d+$/.test(labels.at(-1) as string)) return 'an IP address is not a domain';
  if (inferenceHost && (name === inferenceHost || name.endsWith(`.${inferenceHost}`)))
    return `names under ${inferenceHost} are Berth's own addresses`;
  return undefined;
}

export function domainIssues(name: unknown, pointer: string, inferenceHost?: string): FieldIssue[] {
  if (typeof name !== 'string') return [{ pointer, message: 'a domain name is required' }];
  const why = domainProblem(name, inferenceHost);
  return why ? [{ pointer, message: why }] : [];
}

/**
 * Each domain named (an application's spec.urls, a preview's spec.customDomain) is a verified custom domain of the
 * workspace (its own, or one shared with it and accepted: decision 055), judged at every write: one whose verification
 * lapsed since routes nowhere (the gateway checks again at each request).
 */
export async function verifiedDomainIssues(
  ctx: ValidationContext,
  named: { domain: string; pointer: string }[],
): Promise<FieldIssue[]> {
  const out: FieldIssue[] = [];
  for (const { domain, pointer } of named) {
    const d = await ctx.specOf?.(CUSTOM_DOMAIN_KIND, domain);
    if (!d)
      out.push({
        pointer,
        message: `custom domain ${JSON.stringify(domain)} does not exist in this workspace: claim it (POST /customdomains) and verify it`,
      });
    else if (d.status !== 'verified')
      out.push({
        pointer,
        message: `custom domain ${domain} is ${d.status}: publish its TXT record and verify it (POST /customdomains/${domain}/verify)`,
      });
  }
  return out;
}
