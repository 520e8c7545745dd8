// A sandbox's egress policy and the one decision every part of the egress path takes from it: may this sandbox
// reach this host name? Deny wins over allow; an allow list makes everything else unreachable.
import { domainToASCII } from 'node:url';

export interface EgressPolicy {
  /** When non-empty, only names matching one of these patterns are reachable. */
  allowedDomains: string[];
  /** Names matching one of these are never reachable, whatever the allow list says. */
  forbiddenDomains: string[];
  /**
   * Domain patterns (`proxy.bypass`) never intercepted, whatever the routing rules say: their TLS stays
   * end to end and nothing is injected. They are still subject to the allow and deny lists.
   */
  bypass?: string[];
  /** HTTPS requests to these destinations are intercepted and get headers (and JSON body fields) added. */
  routing?: RoutingRule[];
  /**
   * IPv4 ranges (CIDR) the sandbox may reach with raw TCP (egress.policies allow rules with address
   * destinations), port 25 excepted; the ranges that are never reachable stay so. SNAT'd to the egress address.
   */
  rawCidrs?: string[];
  /** Egress gateway (server setting BERTH_EGRESS_GATEWAYS) whose addresses upstreams see for this sandbox. */
  egressGateway?: string;
  /**
   * The gateway's allocated egress IPs (EgressIp objects' `publicIp`), when it has any: the sandbox's address is
   * one of these. Without any, one of the gateway's whole pool.
   */
  egressPool?: string[];
  /** The gateway address chosen for this sandbox (set by the runtime): the proxy's upstream sockets bind it. */
  egressAddress?: string;
}

export interface RoutingRule {
  /** Domain patterns, as in the allow list; `*` is every destination. */
  destinations: string[];
  /** Header name → value; `{{SECRET:name}}` in a value is replaced from `secrets` at forward time. */
  headers?: Record<string, string>;
  /** Field → value merged into JSON bodies of POST, PUT and PATCH requests; placeholders as in headers. */
  body?: Record<string, string>;
  /** This rule's secrets, in plaintext: only in memory, never in a record, a log or an answer. */
  secrets?: Record<string, string>;
  /**
   * `Authorization: Bearer <the file's content>` at forward time: an OAuth2 connection's access token, which the
   * server rewrites there before it expires (decision 049), so a refresh needs no new policy. `id` names the token in
   * the audit, never its value. Set by the server for replicas bound to a connection, never from a user's spec.
   */
  bearerFile?: { path: string; id: string };
}

/**
 * The first routing rule for a host: specific destinations before a global `*` rule. None for a bypassed host
 * (a certificate-pinning client, say): its connections stay opaque tunnels.
 */
export function ruleFor(policy: EgressPolicy, rawHost: string): RoutingRule | undefined {
  const host = normalizeHost(rawHost);
  if (!host || !policy.routing?.length) return undefined;
  if (policy.bypass?.some((p) => matchesPattern(p, host))) return undefined;
  const hits = policy.routing.filter((r) => r.destinations.some((d) => matchesPattern(d, host)));
  return hits.find((r) => !r.destinations.includes('*')) ?? hits[0];
}

const PLACEHOLDER = /\{\{SECRET:([^}]+)\}\}/g;

/** The value with its placeholders filled from `secrets`; undefined when one names a secret not held. */
export function fillSecrets(value: string, secrets: Record<string, string> = {}): string | undefined {
  let missing = false;
  const out = value.replace(PLACEHOLDER, (_m, name: string) => {
    if (!(name in secrets)) missing = true;
    return secrets[name] ?? '';
  });
  return missing ? undefined : out;
}

/** The policy as it may be stored: routing rules keep their shape, never their secrets. */
export function withoutSecrets(policy: EgressPolicy): EgressPolicy {
  if (!policy.routing) return policy;
  return { ...policy, routing: policy.routing.map((r) => ({ ...r, secrets: undefined })) };
}

export type Verdict = { allow: true; rule: string } | { allow: false; reason: string };

/**
 * The host name as every comparison sees it: lowercase, ASCII (IDNA), no trailing dot. Undefined for what is
 * not a plain DNS name (IP literals, zone ids, ports, empty labels): those never match a domain pattern.
 */
export function normalizeHost(raw: string): string | undefined {
  let h = raw.trim().toLowerCase();
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (!h || h.includes('%') || h.includes(':') || h.includes('[') || h.includes('/')) return undefined;
  const ascii = domainToASCII(h);
  if (!ascii || ascii.length > 253) return undefined;
  if (/^[\d.]+$/.test(ascii)) return undefined; // an IPv4 literal, however written
  if (!/^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/.test(ascii))
    return undefined;
  return ascii;
}

/**
 * `*` matches every name; `*.example.com` matches strict subdomains only (not example.com itself, which a rule
 * lists separately when wanted); anything else matches exactly.
 */
export function matchesPattern(pattern: string, host: string): boolean {
  const p = pattern.trim().toLowerCase().replace(/\.$/, '');
  if (p === '*') return true;
  if (p.startsWith('*.')) {
    const base = normalizeHost(p.slice(2));
    return base !== undefined && host.length > base.length + 1 && host.endsWith(`.${base}`);
  }
  return normalizeHost(p) === host;
}

export function decide(policy: EgressPolicy, rawHost: string): Verdict {
  const host = normalizeHost(rawHost);
  if (!host) return { allow: false, reason: 'not-a-domain-name' };
  const denied = policy.forbiddenDomains.find((p) => matchesPattern(p, host));
  if (denied) return { allow: false, reason: `forbidden by ${denied}` };
  if (policy.allowedDomains.length === 0) return { allow: true, rule: 'no allow list' };
  const allowed = policy.allowedDomains.find((p) => matchesPattern(p, host));
  return allowed ? { allow: true, rule: allowed } : { allow: false, reason: 'not in allowedDomains' };
}

/** A policy that refuses everything: what a sandbox under egress control gets while its policy is unknown. */
export const DENY_ALL: EgressPolicy = { allowedDomains: [], forbiddenDomains: ['*'] };
