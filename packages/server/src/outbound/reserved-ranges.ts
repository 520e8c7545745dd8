// The one list of address ranges that no request made for a user reaches unless the server opens them: every entry
// of IANA's IPv4 and IPv6 Special-Purpose Address Registries, and multicast. The server's own requests
// (address-policy.ts) and the sandboxes' egress (runtime/linux/network.ts, runtime/egress/resolve.ts) read it here.

export interface ReservedRange {
  cidr: string;
  /** What the range is, for refusals ("in 10.0.0.0/8, private (RFC 1918)"). */
  what: string;
}

/**
 * IPv4, sorted and without overlaps: the sandboxes' nftables interval set refuses overlapping elements, so a range
 * inside another (192.0.0.0/29 in 192.0.0.0/24, 255.255.255.255 in 240/4) is covered by the outer one only.
 */
export const RESERVED_V4: readonly ReservedRange[] = [
  { cidr: '0.0.0.0/8', what: '"this network"' },
  { cidr: '10.0.0.0/8', what: 'private (RFC 1918)' },
  { cidr: '100.64.0.0/10', what: 'shared address space (CGNAT)' },
  { cidr: '127.0.0.0/8', what: 'loopback' },
  { cidr: '169.254.0.0/16', what: 'link-local (cloud metadata services)' },
  { cidr: '172.16.0.0/12', what: 'private (RFC 1918)' },
  { cidr: '192.0.0.0/24', what: 'IETF protocol assignments' },
  { cidr: '192.0.2.0/24', what: 'documentation (TEST-NET-1)' },
  { cidr: '192.31.196.0/24', what: 'AS112' },
  { cidr: '192.52.193.0/24', what: 'AMT' },
  { cidr: '192.88.99.0/24', what: '6to4 relay anycast (deprecated)' },
  { cidr: '192.168.0.0/16', what: 'private (RFC 1918)' },
  { cidr: '192.175.48.0/24', what: 'AS112 direct delegation' },
  { cidr: '198.18.0.0/15', what: 'benchmarking' },
  { cidr: '198.51.100.0/24', what: 'documentation (TEST-NET-2)' },
  { cidr: '203.0.113.0/24', what: 'documentation (TEST-NET-3)' },
  { cidr: '224.0.0.0/4', what: 'multicast' },
  { cidr: '240.0.0.0/4', what: 'reserved (and limited broadcast)' },
];

/** IPv6. Sandboxes have no IPv6 route, so only the server's requests read this one; overlaps do no harm here. */
export const RESERVED_V6: readonly ReservedRange[] = [
  { cidr: '::/96', what: 'unspecified, loopback and IPv4-compatible (deprecated)' },
  { cidr: '::ffff:0:0:0/96', what: 'IPv4-translated (SIIT)' },
  { cidr: '64:ff9b:1::/48', what: 'local-use IPv4/IPv6 translation' },
  { cidr: '100::/64', what: 'discard-only' },
  { cidr: '100:0:0:1::/64', what: 'dummy prefix' },
  { cidr: '2001::/23', what: 'IETF protocol assignments (Teredo, benchmarking, ORCHID…)' },
  { cidr: '2001:db8::/32', what: 'documentation' },
  { cidr: '2620:4f:8000::/48', what: 'AS112 direct delegation' },
  { cidr: '3fff::/20', what: 'documentation' },
  { cidr: '5f00::/16', what: 'segment routing (SRv6) SIDs' },
  { cidr: 'fc00::/7', what: 'unique-local' },
  { cidr: 'fe80::/10', what: 'link-local' },
  { cidr: 'fec0::/10', what: 'site-local (deprecated)' },
  { cidr: 'ff00::/8', what: 'multicast' },
];

/**
 * IPv6 ranges that carry an IPv4 address: a connection to one reaches (or is relayed towards) that IPv4 address,
 * so it is judged as that address. `at` is the bit offset of the 32 embedded bits.
 */
export const EMBEDS_V4: readonly (ReservedRange & { at: number })[] = [
  { cidr: '::ffff:0:0/96', what: 'IPv4-mapped', at: 96 },
  { cidr: '64:ff9b::/96', what: 'NAT64', at: 96 },
  { cidr: '2002::/16', what: '6to4', at: 16 },
];

export const LOOPBACK_V4 = '127.0.0.0/8';
export const LOOPBACK_V6 = '::1/128';
/**
 * Addresses that reach the host itself without naming it: 0.0.0.0 and :: connect to the local host on Linux, and
 * the rest of 0.0.0.0/8 names no host at all.
 */
export const THIS_HOST = ['0.0.0.0/8', '::/128'];
