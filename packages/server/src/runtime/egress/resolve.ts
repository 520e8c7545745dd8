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
}

export type Resolved = { addresses: string[] } | { addresses: []; reason: string };

/** IPv4 only: sandboxes have no IPv6 route, and a v4-only guard is one the tests can cover fully. */
export class GuardedResolver {
  private readonly policy: AddressPolicy;
  private readonly resolver?: Resolver;

  constructor(opts: ResolverOptions = {}) {
    this.policy =
      opts.policy ??
      new AddressPolicy({ allowCidrs: opts.allowCidrs ?? [], loopback: 'never', hostRanges: [SANDBOX_NET] });
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

  private readonly cache = new Map<string, { at: number; result: Resolved }>();

  /** Vetted answers are reused for RESOLVE_CACHE_MS: a lookup per connection was most of the proxy's cost. */
  async resolve(host: string): Promise<Resolved> {
    const now = Date.now();
    const hit = this.cache.get(host);
    if (hit && now - hit.at < RESOLVE_CACHE_MS) return hit.result;
    const result = await this.lookup(host);
    if (this.cache.size >= RESOLVE_CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(host, { at: now, result });
    return result;
  }

  private async lookup(host: string): Promise<Resolved> {
    let found: string[];
    try {
      found = this.resolver
        ? await this.resolver.resolve4(host)
        : (await lookup(host, { family: 4, all: true })).map((r) => r.address);
    } catch {
      return { addresses: [], reason: 'name-not-resolved' };
    }
    const addresses = found.filter((a) => this.allowed(a));
    return addresses.length ? { addresses } : { addresses: [], reason: 'blocked-by-resolved-address' };
  }
}

/** As short as Berth's DNS TTL: a changed record is followed within seconds. */
const RESOLVE_CACHE_MS = 5_000;
/** Names kept; the oldest goes first. */
const RESOLVE_CACHE_ENTRIES = 4096;
/** One upstream DNS answer may take this long (two tries): a slow resolver delays, it does not hang, a sandbox. */
const RESOLVE_TIMEOUT_MS = 2_000;
