// The address ranges a request the server makes on a user's behalf (a callback, a git clone) must not reach unless
// the server's settings open them: private, loopback, link-local, CGNAT, benchmark, multicast and reserved ranges.
// The server must not be a way into the network around it (SSRF). IPv4-mapped IPv6 is judged as its IPv4 address.
import { BlockList, isIP } from 'node:net';

const BLOCKED_V4 = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const;
const BLOCKED_V6 = [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const;

/**
 * Whether an address is closed to a request the server makes on a user's behalf: in a blocked range and not
 * opened by `allowCidrs` (CIDR strings).
 */
export function outboundBlockList(allowCidrs: string[]) {
  const blocked = new BlockList();
  for (const [a, p] of BLOCKED_V4) blocked.addSubnet(a, p, 'ipv4');
  for (const [a, p] of BLOCKED_V6) blocked.addSubnet(a, p, 'ipv6');
  const allowed = new BlockList();
  for (const c of allowCidrs) {
    const [a, p] = c.split('/');
    const family = isIP(a) === 6 ? 'ipv6' : 'ipv4';
    allowed.addSubnet(a, Number(p ?? (family === 'ipv6' ? 128 : 32)), family);
  }
  return (address: string) => {
    // An IPv4-mapped IPv6 address is judged as the IPv4 address it is.
    const mapped = address.toLowerCase().startsWith('::ffff:') && isIP(address.slice(7)) === 4;
    const a = mapped ? address.slice(7) : address;
    const f = isIP(a) === 6 ? 'ipv6' : 'ipv4';
    return blocked.check(a, f) && !allowed.check(a, f);
  };
}
