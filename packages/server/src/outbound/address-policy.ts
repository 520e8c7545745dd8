// Whether an address may be connected to on a user's behalf: a pure judgement over the reserved ranges
// (reserved-ranges.ts), the ranges the server's settings open, and the host's own addresses. Three kinds of closed:
// - the host's own (its interface addresses, 0.0.0.0 and ::, ranges the runtime owns such as the sandboxes'
//   network): never opened, whatever the settings — a range opened for a LAN must not open the host in it;
// - loopback: opened only by listing a range inside it (127.0.0.0/8, 127.0.0.1/32, ::1), and only where the policy
//   allows that at all (the server's own requests to a local model; never the sandboxes' egress);
// - reserved: opened by any listed range that covers the address (0.0.0.0/0 covers them all).
// IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged as that IPv4 address.
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import ipaddr from 'ipaddr.js';
import {
  EMBEDS_V4,
  LOOPBACK_V4,
  LOOPBACK_V6,
  RESERVED_V4,
  RESERVED_V6,
  type ReservedRange,
  THIS_HOST,
} from './reserved-ranges.js';

export type ClosedClass = 'host' | 'loopback' | 'reserved';

export type Verdict =
  | { open: true }
  | {
      open: false;
      class: ClosedClass;
      /** The address judged (the embedded IPv4 one for a mapped, NAT64 or 6to4 address). */
      address: string;
      /** The reserved range it is in (for `reserved` and `loopback`). */
      range?: ReservedRange;
    };

export interface AddressPolicyOptions {
  /** CIDRs (IPv4 and IPv6) the server's settings open. */
  allowCidrs: string[];
  /** `when-listed`: a listed range inside loopback opens it (the server's requests); `never`: sandboxes' egress. */
  loopback: 'when-listed' | 'never';
  /** Ranges that belong to this host beside its interface addresses (the sandboxes' network): never opened. */
  hostRanges?: string[];
  /** The host's interface addresses; default: os.networkInterfaces(), read again at most every second. */
  interfaces?: () => string[];
}

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** How long the host's interface addresses are reused: reading them costs ~0.2 ms on a host with many veths. */
const INTERFACES_TTL_MS = 1_000;

const parseCidr = (cidr: string): Cidr => {
  const [a, bits] = cidr.split('/');
  const addr = ipaddr.parse(a);
  return [addr, bits === undefined ? (addr.kind() === 'ipv6' ? 128 : 32) : Number(bits)];
};

const inCidr = (a: ipaddr.IPv4 | ipaddr.IPv6, [net, bits]: Cidr) =>
  a.kind() === net.kind() && a.match(net, bits);

/** Whether `inner` lies wholly inside `outer`. */
const within = (inner: Cidr, outer: Cidr) => inner[1] >= outer[1] && inCidr(inner[0], outer);

const RESERVED = [...RESERVED_V4, ...RESERVED_V6].map((r) => ({ range: r, cidr: parseCidr(r.cidr) }));
const EMBEDDED = EMBEDS_V4.map((r) => ({ at: r.at, cidr: parseCidr(r.cidr) }));
const LOOPBACK = [parseCidr(LOOPBACK_V4), parseCidr(LOOPBACK_V6)];
const THIS_HOST_CIDRS = THIS_HOST.map(parseCidr);

/** An address as ipaddr parses it, zone id dropped; undefined when `address` is not an IP address. */
export function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const a = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  // net.isIP first: ipaddr alone also takes the legacy forms (127.1, 0x7f.1), which never reach here unnormalised.
  return isIP(a) ? ipaddr.parse(a) : undefined;
}

/** The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), if it carries one. */
function embeddedV4(a: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  for (const e of EMBEDDED) {
    if (!inCidr(a, e.cidr)) continue;
    const bytes = a.toByteArray().slice(e.at / 8, e.at / 8 + 4);
    return new ipaddr.IPv4(bytes);
  }
  return undefined;
}

function hostInterfaces(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
}

export class AddressPolicy {
  private readonly allowed: Cidr[];
  /** Listed ranges that lie inside loopback: the only way loopback opens. */
  private readonly loopbackOpened: Cidr[];
  private readonly hostRanges: Cidr[];
  private readonly interfaces: () => string[];
  private own?: { at: number; addresses: Set<string> };

  constructor(opts: AddressPolicyOptions) {
    this.allowed = opts.allowCidrs.map(parseCidr);
    this.loopbackOpened =
      opts.loopback === 'when-listed' ? this.allowed.filter((c) => LOOPBACK.some((l) => within(c, l))) : [];
    this.hostRanges = (opts.hostRanges ?? []).map(parseCidr);
    this.interfaces = opts.interfaces ?? hostInterfaces;
  }

  /** The verdict on one address (any textual form `net.isIP` accepts, brackets and zone id allowed). */
  judge(address: string): Verdict {
    const parsed = parseAddress(address);
    if (!parsed) return { open: false, class: 'reserved', address };
    const v4 = parsed.kind() === 'ipv6' ? embeddedV4(parsed as ipaddr.IPv6) : undefined;
    const a = v4 ?? parsed;
    const text = a.toString();
    if (THIS_HOST_CIDRS.some((c) => inCidr(a, c)) || this.isOwn(a))
      return { open: false, class: 'host', address: text };
    const range = RESERVED.find((r) => inCidr(a, r.cidr))?.range;
    if (LOOPBACK.some((c) => inCidr(a, c)))
      return this.loopbackOpened.some((c) => inCidr(a, c))
        ? { open: true }
        : { open: false, class: 'loopback', address: text, range };
    if (!range || this.allowed.some((c) => inCidr(a, c))) return { open: true };
    return { open: false, class: 'reserved', address: text, range };
  }

  /** The host's interface addresses (loopback's own are judged as loopback) and the host ranges. */
  private isOwn(a: ipaddr.IPv4 | ipaddr.IPv6): boolean {
    if (this.hostRanges.some((c) => inCidr(a, c))) return true;
    if (LOOPBACK.some((c) => inCidr(a, c))) return false;
    const now = Date.now();
    if (!this.own || now - this.own.at > INTERFACES_TTL_MS) {
      const addresses = new Set<string>();
      for (const i of this.interfaces()) {
        const p = parseAddress(i);
        if (p) addresses.add(p.toString());
      }
      this.own = { at: now, addresses };
    }
    return this.own.addresses.has(a.toString());
  }
}

/** Why a closed address is closed, and what would open it, for refusals; `setting` names the server's setting. */
export function closedReason(v: Verdict & { open: false }, setting: string): string {
  switch (v.class) {
    case 'host':
      return `${v.address} is an address of this host, never opened`;
    case 'loopback':
      return `${v.address} is loopback (${setting}=127.0.0.0/8 opens it)`;
    default:
      return `${v.address} is in ${v.range?.cidr ?? 'no known range'}, ${v.range?.what ?? 'not an address'} (${setting} opens a range)`;
  }
}
