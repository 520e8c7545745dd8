// Resolving a name for a sandbox, once, on the host: the answer is checked against the addresses no sandbox may
// reach, and only a vetted address is ever dialled (a name re-resolved later could point elsewhere: rebinding).
// The rules are the server's outbound ones (outbound/address-policy.ts) with loopback never opened: the reserved
// ranges closed unless BERTH_SANDBOX_ALLOW_CIDRS opens them, and the host's own addresses (its interfaces, the
// sandboxes' network) closed whatever it opens — as the nftables path closes them (the input chain).
import { lookup, Resolver } from 'node:dns/promises';
import { isIPv4 } from 'node:net';
import { AddressPolicy } from '../../outbound/index.js';
import { SANDBOX_NET } from '../linux/network.js';

export interface ResolverOptions {
  /** DNS servers to ask instead of the host's resolver (getaddrinfo: /etc/hosts, then resolv.conf). */
  servers?: string[];
  /** IPv4 CIDRs the server's settings open despite the blocked ranges (BERTH_SANDBOX_ALLOW_CIDRS). */
  allowCidrs?: string[];
  /**
   * The rules instead of those built from allowCidrs (the proxy's unit test stands a LAN on a loopback address,
   * which sandboxes' egress never opens).
   */
  policy?: AddressPolicy;
  /** Milliseconds now (tests move time on without sleeping). */
  clock?: () => number;
}

export type Resolved = { addresses: string[] } | { addresses: []; reason: string };

interface Cached {
  expires: number;
  result: Promise<Resolved>;
}

/** IPv4 only: sandboxes have no IPv6 route, and a v4-only guard is one the tests can cover fully. */
export class GuardedResolver {
  private readonly policy: AddressPolicy;
  private readonly resolver?: Resolver;
  private readonly clock: () => number;
  /**
   * Vetted answers by sandbox, then name: a lookup per connection was most of a new connection's cost through the
   * proxy. Never shared between sandboxes: one sandbox cannot learn from the time of its lookups what another
   * looked up, and an address handed to a sandbox that is gone (its address reused) is forgotten with it.
   */
  private readonly cache = new Map<string, Cached>();

  constructor(opts: ResolverOptions = {}) {
    this.policy =
      opts.policy ??
      new AddressPolicy({ allowCidrs: opts.allowCidrs ?? [], loopback: 'never', hostRanges: [SANDBOX_NET] });
    this.clock = opts.clock ?? Date.now;
    if (opts.servers?.length) {
      this.resolver = new Resolver({ timeout: RESOLVE_TIMEOUT_MS, tries: 2 });
      this.resolver.setServers(opts.servers);
    }
  }

  /** Whether a sandbox may be connected to this address (by the proxy, or told it by Berth's DNS). */
  allowed(address: string): boolean {
    const a = address.startsWith('::ffff:') ? address.slice(7) : address;
    return isIPv4(a) && this.policy.judge(a).open;
  }

  /**
   * The vetted addresses of `host` for the sandbox at `source`: from its own cache while the record's TTL (at most
   * RESOLVE_CACHE_MS) runs, else asked upstream once however many of its connections wait for the answer.
   */
  resolve(source: string, host: string): Promise<Resolved> {
    const key = `${source} ${host}`;
    const now = this.clock();
    const hit = this.cache.get(key);
    if (hit && now < hit.expires) return hit.result;
    if (hit) this.cache.delete(key);
    if (this.cache.size >= RESOLVE_CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
    // Held while the lookup runs (concurrent connections share it); its expiry is set from the answer's TTL.
    const entry: Cached = { expires: Number.POSITIVE_INFINITY, result: Promise.resolve({ addresses: [] }) };
    entry.result = this.lookup(host).then(({ result, ttlMs }) => {
      entry.expires = this.clock() + ttlMs;
      if (ttlMs <= 0 && this.cache.get(key) === entry) this.cache.delete(key);
      return result;
    });
    this.cache.set(key, entry);
    return entry.result;
  }

  /** Drops a sandbox's answers: its policy changed, or it is gone and its address may go to another sandbox. */
  forget(source: string): void {
    const prefix = `${source} `;
    for (const key of this.cache.keys()) if (key.startsWith(prefix)) this.cache.delete(key);
  }

  private async lookup(host: string): Promise<{ result: Resolved; ttlMs: number }> {
    let found: { address: string; ttl: number }[];
    try {
      found = this.resolver
        ? await this.resolver.resolve4(host, { ttl: true })
        : // getaddrinfo says no TTL: the cap stands for it.
          (await lookup(host, { family: 4, all: true })).map((r) => ({
            address: r.address,
            ttl: RESOLVE_CACHE_MS / 1000,
          }));
    } catch {
      return { result: { addresses: [], reason: 'name-not-resolved' }, ttlMs: NEGATIVE_CACHE_MS };
    }
    const addresses = found.filter((a) => this.allowed(a.address)).map((a) => a.address);
    const ttlMs = Math.min(RESOLVE_CACHE_MS, ...found.map((a) => a.ttl * 1000));
    return {
      result: addresses.length ? { addresses } : { addresses: [], reason: 'blocked-by-resolved-address' },
      ttlMs,
    };
  }
}

/** At most as long as Berth's DNS TTL (dns-server.ts): a changed record is followed within seconds. */
const RESOLVE_CACHE_MS = 5_000;
/** A name that did not resolve is asked again after this long. */
const NEGATIVE_CACHE_MS = 1_000;
/** Answers kept, all sandboxes together; the oldest goes first. */
const RESOLVE_CACHE_ENTRIES = 4096;
/** One upstream DNS answer may take this long (two tries): a slow resolver delays, it does not hang, a sandbox. */
const RESOLVE_TIMEOUT_MS = 2_000;
