// Sandbox networking: one network namespace per sandbox joined to the host by a veth pair on a /30,
// outbound NAT, and an nftables table (`inet berth`, rules shared by every sandbox through the `bh*`
// interface-name wildcard) that keeps sandboxes away from the host and from each other; `inet berth_private`
// keeps them from the private networks around the host except the ranges each one's server opens.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { RESERVED_V4 } from '../../outbound/index.js';
import { run, sleep } from './exec.js';
import { DEFAULT_EGRESS_PORTS, type EgressPorts } from './egress-ports.js';
import { MAX_SLOTS } from './slots.js';

/** Private range used only inside this machine; each slot takes one /30 of it. */
export const SANDBOX_NET = '10.200.0.0/16';
const NET_BASE = (10 << 24) | (200 << 16);
const HOST_IF_PREFIX = 'bh';
/** Where the first server to enable forwarding records the previous value, shared by all drivers. */
const FORWARD_ORIG = '/run/berth/ip_forward.orig';
const IP_FORWARD = '/proc/sys/net/ipv4/ip_forward';
/** Namespace teardown runs in a kernel work queue: milliseconds normally, longer under load. */
const VETH_GONE_TIMEOUT_MS = 5_000;

/**
 * Destinations a sandbox does not reach through the host unless the server opens them (allowCidrs): the reserved
 * IPv4 ranges (outbound/reserved-ranges.ts, the list the server's own requests are judged by) — private and shared
 * ranges (RFC 1918, CGNAT 100.64/10), link-local (cloud metadata services), loopback, "this network", IETF,
 * documentation and benchmarking ranges, multicast and the reserved 240/4 (with broadcast). The host's own addresses
 * are covered by the input chain, other sandboxes by the forward chain, whatever is allowed; the sandboxes'
 * resolvers are accepted before this set is read. An interval set: that list has no overlapping entries, so the
 * sandbox range (inside 10/8) has its own rule.
 */
export const BLOCKED_DESTINATIONS = RESERVED_V4.map((r) => r.cidr);

export interface HostNetworkOptions {
  /** This server's egress ports (egress-ports.ts): its chain in `inet berth_egress` redirects to them. */
  egressPorts?: EgressPorts;
  /** The resolvers sandboxes use (their resolv.conf): reachable on port 53 even inside a blocked range. */
  dnsServers?: string[];
}

/**
 * Bit of the connection mark that the per-server chain of `inet berth_egress` sets on a policed sandbox's
 * connections to its server's egress ports, so that `inet berth`'s input chain (shared by every server, whatever
 * its ports) accepts them. The conntrack mark, not the packet's: NAT chains see only a connection's first packet,
 * and a retransmitted SYN must be accepted too. One high bit, left alone by the usual users of marks.
 */
export const EGRESS_MARK = 0x00200000;

export interface SlotNet {
  netns: string;
  netnsPath: string;
  hostIf: string;
  hostAddress: string;
  address: string;
}

const hex = (n: number) => `0x${n.toString(16).padStart(8, '0')}`;
const ipv4 = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

/** The slot whose sandbox has `address` (slotNet's inverse), or undefined for any other value. */
export function slotOfAddress(address: unknown): number | undefined {
  if (typeof address !== 'string' || !/^10\.200\.\d+\.\d+$/.test(address)) return undefined;
  const n = address.split('.').reduce((x, o) => x * 256 + Number(o), 0);
  const slot = Math.floor((n - NET_BASE) / 4);
  return slot < MAX_SLOTS ? slot : undefined;
}

export function slotNet(slot: number, name: string): SlotNet {
  const base = NET_BASE + slot * 4;
  return {
    netns: `berth-${name}`,
    netnsPath: `/run/netns/berth-${name}`,
    hostIf: `${HOST_IF_PREFIX}${slot}`,
    hostAddress: ipv4(base + 1),
    address: ipv4(base + 2),
  };
}

/**
 * The Berth-owned ruleset shared by every server; replaced atomically as a whole, idempotent, never touches other
 * tables. What a sandbox may reach among the private ranges is in `inet berth_private` (privateTableText): a
 * table rebuilt by every server start cannot hold one server's setting without overwriting another's.
 */
export function rulesetText(dropOtherForwarding: boolean): string {
  const bh = `"${HOST_IF_PREFIX}*"`;
  return `table inet berth
delete table inet berth
table inet berth {
  chain antispoof {
    type filter hook prerouting priority raw; policy accept;
    iifname ${bh} fib saddr . iif oif missing counter drop comment "a sandbox sends only from its own address"
  }
  chain input {
    type filter hook input priority filter - 10; policy accept;
    iifname ${bh} ct state established,related accept
    iifname ${bh} ct mark & ${hex(EGRESS_MARK)} == ${hex(EGRESS_MARK)} accept comment "a server's egress proxy and DNS (marked in inet berth_egress)"
    iifname ${bh} counter drop comment "sandboxes never reach the host itself"
  }
  chain output {
    type filter hook output priority filter - 10; policy accept;
    ip daddr ${SANDBOX_NET} meta skuid != 0 counter reject comment "only root (Berth) connects into sandboxes"
  }
  chain forward {
    type filter hook forward priority filter - 10; policy accept;
    iifname ${bh} oifname ${bh} counter drop comment "sandbox to sandbox"
    iifname ${bh} ip daddr ${SANDBOX_NET} counter drop comment "sandbox to sandbox"
    iifname ${bh} meta nfproto ipv6 counter drop comment "sandboxes have no IPv6 route out"
    iifname ${bh} accept
    oifname ${bh} ct state established,related accept
    oifname ${bh} counter drop comment "no inbound connections from outside"
${dropOtherForwarding ? '    counter drop comment "forwarding was off before Berth: keep it off for everything else"\n' : ''}  }
  chain egress_redirect {
    comment "reserved: the egress proxy will redirect sandbox TCP here (prerouting dnat to a host port)"
  }
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    iifname ${bh} jump egress_redirect
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${SANDBOX_NET} oifname != ${bh} masquerade
  }
}
`;
}

/**
 * The private ranges around the host, closed to sandboxes except what each sandbox's server opens. Like
 * `inet berth_egress` it is never deleted: its chain and shared sets are rewritten in one transaction by every
 * server start (the same text from every server), while `allowed` holds one element per sandbox address and
 * opened range, written only by the server holding that address's slot (setAllowedRanges). So a server's start
 * or exit never changes what another server's sandboxes reach. The resolvers are the host's (/etc), the same
 * for every server. Accepting here does not skip `inet berth`'s drops (another base chain): sandbox-to-sandbox
 * traffic, the host itself (input chain) and IPv6 stay closed whatever is opened.
 */
export function privateTableText(dnsServers: string[] = []): string {
  const t = 'inet berth_private';
  const bh = `"${HOST_IF_PREFIX}*"`;
  const dns = dnsServers.filter((a) => /^\d+\.\d+\.\d+\.\d+$/.test(a));
  return `add table ${t}
add set ${t} blocked_dst { type ipv4_addr; flags interval; }
add set ${t} dns_dst { type ipv4_addr; }
add set ${t} allowed { type ipv4_addr . ipv4_addr; flags interval; }
add chain ${t} forward { type filter hook forward priority filter - 15; policy accept; }
flush set ${t} blocked_dst
flush set ${t} dns_dst
flush chain ${t} forward
add element ${t} blocked_dst { ${BLOCKED_DESTINATIONS.join(', ')} }
${dns.length ? `add element ${t} dns_dst { ${dns.join(', ')} }\n` : ''}add rule ${t} forward iifname ${bh} ip daddr @dns_dst meta l4proto { tcp, udp } th dport 53 accept comment "the sandboxes' resolvers"
add rule ${t} forward iifname ${bh} ip saddr . ip daddr @allowed accept comment "opened by the sandbox's server (BERTH_SANDBOX_ALLOW_CIDRS)"
add rule ${t} forward iifname ${bh} ip daddr @blocked_dst counter drop comment "private, link-local and reserved ranges"
`;
}

/**
 * The table of sandboxes under an egress policy (runtime/egress): their ports 80, 443 and 53 go to their server's
 * egress child, everything else they send is dropped. Unlike `inet berth` it is never deleted, only its chains are
 * rewritten (one transaction), so a server start never empties the set of policed addresses: that would open
 * the sandboxes' egress until their policies were applied again. Each server has its own chain (named after its
 * explicit port) with its redirects; the `owners` map sends a policed address to its server's chain. An address
 * policed but without an owner matches no redirect and is dropped: fail closed.
 */
export function egressTableText(ports: EgressPorts = DEFAULT_EGRESS_PORTS): string {
  const t = 'inet berth_egress';
  const bh = `"${HOST_IF_PREFIX}*"`;
  const srv = serverChain(ports);
  const mark = `ct mark set ct mark | ${hex(EGRESS_MARK)}`;
  return `add table ${t}
add set ${t} policed { type ipv4_addr; }
add map ${t} owners { type ipv4_addr : verdict; }
add set ${t} raw_allowed { type ipv4_addr . ipv4_addr; flags interval; }
add map ${t} snat_to { type ipv4_addr : ipv4_addr; }
add chain ${t} postrouting { type nat hook postrouting priority srcnat - 5; policy accept; }
add set ${t} server_ports { type inet_service; }
add chain ${t} prerouting { type nat hook prerouting priority dstnat - 5; policy accept; }
add chain ${t} forward { type filter hook forward priority filter - 20; policy accept; }
add chain ${t} input { type filter hook input priority filter - 20; policy accept; }
add chain ${t} ${srv}
flush chain ${t} prerouting
flush chain ${t} forward
flush chain ${t} input
flush chain ${t} postrouting
flush chain ${t} ${srv}
add rule ${t} prerouting iifname ${bh} ip saddr vmap @owners
add rule ${t} forward iifname ${bh} ip saddr @policed tcp dport 25 counter drop comment "SMTP, CIDR rules or not"
add rule ${t} forward iifname ${bh} ip saddr . ip daddr @raw_allowed meta l4proto tcp accept comment "CIDR rules: raw TCP"
add rule ${t} forward iifname ${bh} ip saddr @policed counter drop comment "egress policy: only the proxy and Berth's DNS"
add rule ${t} postrouting ip saddr . ip daddr @raw_allowed snat ip to ip saddr map @snat_to comment "CIDR rules leave from the egress address"
add rule ${t} input iifname != ${bh} meta l4proto { tcp, udp } th dport @server_ports counter drop comment "egress proxies serve sandboxes only"
add rule ${t} ${srv} tcp dport 443 ${mark} redirect to :${ports.tls}
add rule ${t} ${srv} tcp dport 80 ${mark} redirect to :${ports.http}
add rule ${t} ${srv} meta l4proto { tcp, udp } th dport 53 ${mark} redirect to :${ports.dns}
add rule ${t} ${srv} tcp dport ${ports.explicit} ${mark}
`;
}

const serverChain = (ports: EgressPorts) => `server_${ports.explicit}`;

/**
 * Puts a sandbox's address under egress control by the server with `ports` (its traffic redirected there), or
 * takes it out (`undefined`); idempotent either way, and an owner left by a server that died is replaced.
 */
export async function setEgressControl(address: string, ports: EgressPorts | undefined): Promise<void> {
  const t = 'inet berth_egress';
  const el = `${t} policed { ${address} }`;
  // Adding first makes the delete succeed whether or not the address was there (one transaction).
  if (ports) await run('nft', ['-f', '-'], `add element ${el}\n`);
  // A map element is deleted by key alone, but a missing one is an error (nft 1.0.6 has no `destroy`).
  await run('nft', ['delete', 'element', 'inet', 'berth_egress', 'owners', `{ ${address} }`]).catch(
    () => undefined,
  );
  if (ports)
    await run('nft', [
      'add',
      'element',
      'inet',
      'berth_egress',
      'owners',
      `{ ${address} : jump ${serverChain(ports)} }`,
    ]);
  else await run('nft', ['-f', '-'], `add element ${el}\ndelete element ${el}\n`);
}

/** A policed sandbox's raw TCP: the ranges it may reach and the address those flows leave from. */
export interface RawEgress {
  cidrs: string[];
  snat?: string;
}

/**
 * Replaces the raw TCP rules of the sandbox at `address` (none: `undefined` or no ranges), as setAllowedRanges
 * does its private ranges; then the address those flows leave from.
 */
export async function setRawEgress(address: string, raw: RawEgress | undefined): Promise<void> {
  const t = ['inet', 'berth_egress'];
  await replaceAddressRanges('inet berth_egress', 'raw_allowed', address, raw?.cidrs ?? []);
  await run('nft', ['delete', 'element', ...t, 'snat_to', `{ ${address} }`]).catch(() => undefined);
  if (raw?.snat && raw.cidrs.length)
    await run('nft', ['add', 'element', ...t, 'snat_to', `{ ${address} : ${raw.snat} }`]);
}

/**
 * Replaces the private ranges (BERTH_SANDBOX_ALLOW_CIDRS) the sandbox at `address` may reach: only the server
 * holding the address's slot calls it, so it never changes another server's sandboxes.
 */
export async function setAllowedRanges(address: string, cidrs: string[]): Promise<void> {
  await replaceAddressRanges('inet berth_private', 'allowed', address, cidrs);
}

/**
 * Replaces the `address . range` elements of an interval set in one transaction. The old elements are read
 * back from the kernel, so a server that did not write them (a restart, a dead holder of the slot) removes them
 * too; nested ranges are reduced to the outer one (a concatenated interval set refuses overlaps).
 */
async function replaceAddressRanges(table: string, set: string, address: string, cidrs: string[]) {
  const listed = JSON.parse(await run('nft', ['-j', 'list', 'set', ...table.split(' '), set]));
  const ops = rangeDeletes(table, set, address, listed.nftables?.find((x: any) => x.set)?.set?.elem ?? []);
  for (const c of outermostCidrs(cidrs)) ops.push(`add element ${table} ${set} { ${address} . ${c} }\n`);
  if (ops.length) await run('nft', ['-f', '-'], ops.join(''));
}

/** Deletions of the `address . range` elements among `elems` (a concatenated interval set as `nft -j` lists it). */
function rangeDeletes(table: string, set: string, address: string, elems: unknown[]): string[] {
  return elems
    .map((e: any) => e?.elem?.val ?? e)
    .filter((e: any) => Array.isArray(e?.concat) && e.concat[0] === address)
    .map((e: any) => `delete element ${table} ${set} { ${address} . ${nftRange(e.concat[1])} }\n`);
}

/** The ranges of `cidrs` (normalised `a.b.c.d/n`) not inside another one, each once: they cover the same. */
export function outermostCidrs(cidrs: string[]): string[] {
  const parsed = [...new Set(cidrs)].map((c) => {
    const [a, len] = c.split('/');
    const n = a.split('.').reduce((x, o) => x * 256 + Number(o), 0);
    return { c, start: n, end: n + 2 ** (32 - Number(len ?? 32)) - 1 };
  });
  return parsed
    .filter((p) => !parsed.some((q) => q !== p && q.start <= p.start && p.end <= q.end))
    .map((p) => p.c);
}

/** An interval element of `nft -j` back in nft syntax: `a.b.c.d`, `a.b.c.d/n` or `a-b`. */
function nftRange(v: any): string {
  if (typeof v === 'string') return v;
  if (v?.prefix) return `${v.prefix.addr}/${v.prefix.len}`;
  if (Array.isArray(v?.range)) return `${v.range[0]}-${v.range[1]}`;
  throw new Error(`unexpected nft set element ${JSON.stringify(v)}`);
}

const portList = (p: EgressPorts) => [...new Set([p.explicit, p.tls, p.http, p.dns])].join(', ');

/**
 * Keeps an egress child's ports from everything but sandbox interfaces. The child calls it once it listens on
 * them and releases them when it stops, so an element of the set always has a live listener behind it: a port
 * left in the set by a process that died would drop the connections of whatever binds it next (the test servers'
 * ports are ephemeral ones).
 */
export async function holdEgressPorts(ports: EgressPorts): Promise<void> {
  await run('nft', ['add', 'element', 'inet', 'berth_egress', 'server_ports', `{ ${portList(ports)} }`]);
}

/** At a server's or its egress child's stop: its ports are no longer kept from the rest of the host. */
export async function releaseEgressPorts(ports: EgressPorts): Promise<void> {
  await run('nft', [
    'delete',
    'element',
    'inet',
    'berth_egress',
    'server_ports',
    `{ ${portList(ports)} }`,
  ]).catch(() => undefined);
}

/**
 * Removes the ports of `server_ports` no socket of the host listens on: ones left by an egress child killed with
 * SIGKILL together with its server. Each server start runs it; a live child's ports are never removed (it adds
 * them only once it listens).
 */
export async function sweepEgressPorts(): Promise<number[]> {
  const listed = JSON.parse(await run('nft', ['-j', 'list', 'set', 'inet', 'berth_egress', 'server_ports']));
  const elems: unknown[] = listed.nftables?.find((x: any) => x.set)?.set?.elem ?? [];
  const ports = elems.filter((e): e is number => typeof e === 'number');
  if (!ports.length) return [];
  const bound = boundPorts();
  const stale = ports.filter((p) => !bound.has(p));
  if (stale.length)
    await run('nft', [
      'delete',
      'element',
      'inet',
      'berth_egress',
      'server_ports',
      `{ ${stale.join(', ')} }`,
    ]).catch(() => undefined);
  return stale;
}

/** The local ports of the host's listening TCP sockets and bound UDP sockets (the DNS port is both). */
export function boundPorts(): Set<number> {
  const out = new Set<number>();
  for (const f of ['tcp', 'tcp6', 'udp', 'udp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/net/${f}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 4) continue;
      // TCP: 0A is LISTEN; UDP: 07 is an unconnected bound socket.
      if (cols[3] !== (f.startsWith('tcp') ? '0A' : '07')) continue;
      out.add(Number.parseInt(cols[1].split(':')[1], 16));
    }
  }
  return out;
}

/** Installs the tables and turns IPv4 forwarding on, remembering whether it was off. Safe to repeat, and
 *  leaves every other server's rules alone. Needs /run/berth (host.ts ensureRunDirs). */
export async function setupHostNetwork(opts: HostNetworkOptions = {}): Promise<void> {
  if (!existsSync(FORWARD_ORIG))
    writeFileSync(FORWARD_ORIG, readFileSync(IP_FORWARD, 'utf8'), { flag: 'wx' });
  const wasOff = readFileSync(FORWARD_ORIG, 'utf8').trim() === '0';
  await run(
    'nft',
    ['-f', '-'],
    rulesetText(wasOff) + privateTableText(opts.dnsServers) + egressTableText(opts.egressPorts),
  );
  await sweepEgressPorts();
  writeFileSync(IP_FORWARD, '1');
}

/**
 * Creates the namespace, the veth pair, addresses, the default route (two `ip` invocations), the
 * ingress rule inside it and the private ranges its server opens (`allowCidrs`).
 * The caller holds the slot, so anything already named after it is debris (an `ip` that outlived a
 * killed server, say) and is deleted first.
 */
export async function createSlotNetwork(net: SlotNet, allowCidrs: string[]): Promise<void> {
  await deleteLinks(net);
  await run(
    'ip',
    ['-batch', '-'],
    [
      `netns add ${net.netns}`,
      `link add ${net.hostIf} type veth peer name eth0 netns ${net.netns}`,
      `addr add ${net.hostAddress}/30 dev ${net.hostIf}`,
      `link set ${net.hostIf} up`,
      '',
    ].join('\n'),
  );
  await run(
    'ip',
    ['-n', net.netns, '-batch', '-'],
    [
      'link set lo up',
      `addr add ${net.address}/30 dev eth0`,
      'link set eth0 up',
      `route add default via ${net.hostAddress}`,
      '',
    ].join('\n'),
  );
  // A previous holder of this address may have died under an egress policy, or with other private ranges
  // opened, without its teardown running.
  await Promise.all([setupNamespace(net), resetAddressRules(net.address, allowCidrs)]);
}

/**
 * What a fresh slot's address gets in the shared tables: nothing of a previous holder's (egress control, raw ranges
 * and their source address, private ranges) and this server's private ranges. Both tables are read back from the
 * kernel, so a holder whose server died without its teardown is cleared too; then one transaction deletes exactly
 * what is there and adds the ranges. Three nft processes (two of them at once) where setAllowedRanges,
 * setEgressControl and setRawEgress took six: each is a fork of the server, on every pool start.
 */
export async function resetAddressRules(address: string, allowCidrs: string[]): Promise<void> {
  const [egress, priv] = await Promise.all([listTable('inet berth_egress'), listTable('inet berth_private')]);
  const keyOf = (e: any) => {
    const k = Array.isArray(e) ? e[0] : e; // a map's element is [key, value]
    return k?.elem?.val ?? k;
  };
  const ops = [
    ...rangeDeletes('inet berth_private', 'allowed', address, priv.get('allowed') ?? []),
    ...outermostCidrs(allowCidrs).map(
      (c) => `add element inet berth_private allowed { ${address} . ${c} }\n`,
    ),
    ...rangeDeletes('inet berth_egress', 'raw_allowed', address, egress.get('raw_allowed') ?? []),
    ...['policed', 'owners', 'snat_to']
      .filter((name) => (egress.get(name) ?? []).some((e) => keyOf(e) === address))
      .map((name) => `delete element inet berth_egress ${name} { ${address} }\n`),
  ];
  if (ops.length) await run('nft', ['-f', '-'], ops.join(''));
}

/** The elements of every set and map of a table, by name, as `nft -j` has them. */
async function listTable(table: string): Promise<Map<string, unknown[]>> {
  const listed = JSON.parse(await run('nft', ['-j', 'list', 'table', ...table.split(' ')]));
  const out = new Map<string, unknown[]>();
  for (const x of listed.nftables ?? []) {
    const s = x?.set ?? x?.map;
    if (s?.name) out.set(s.name, s.elem ?? []);
  }
  return out;
}

/**
 * Inside the namespace: IPv6 off on every interface, lo included (no address, link-local or loopback, and no
 * multicast: sandboxes are IPv4 only, and the host forwards no IPv6 for them either). `all` carries the setting to
 * the interfaces that exist, `default` to any made later. A host booted without IPv6 has no such files.
 */
const IPV6_OFF =
  '[ ! -d /proc/sys/net/ipv6 ] || { echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; }';

/**
 * Sets the namespace up from inside: IPv6 off, and the ingress rule installed (or replaced). Idempotent: also run
 * for sandboxes adopted at start (warm ones included), so ones made by a server without either get them.
 */
export async function setupNamespace(net: SlotNet): Promise<void> {
  await run(
    'nsenter',
    [
      `--net=${net.netnsPath}`,
      'sh',
      '-c',
      `${IPV6_OFF} && echo 1 > /proc/sys/net/ipv4/conf/eth0/route_localnet && exec nft -f -`,
    ],
    ingressRulesetText(net),
  );
}

/**
 * Inside the sandbox's namespace: TCP the host opens to the sandbox's address is delivered to 127.0.0.1 (same
 * port), so the gateway reaches a server on port n whether it listens on loopback or on every address, with
 * no process in between (what `/port/{n}` used to cost: a second proxy hop through the sandbox's daemon).
 * route_localnet lets eth0 carry those loopback-bound packets; only the host end of this sandbox's own veth
 * matches (other sandboxes never reach it: the host drops sandbox-to-sandbox forwarding), and on the host only
 * root may open such connections (the output chain above).
 */
export function ingressRulesetText(net: SlotNet): string {
  return `table ip berth_ingress
delete table ip berth_ingress
table ip berth_ingress {
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    iifname "eth0" ip saddr ${net.hostAddress} ip daddr ${net.address} meta l4proto tcp dnat to 127.0.0.1
  }
}
`;
}

/**
 * Deletes the namespace (its veth end goes with it), the host end if it lingers, and the private ranges its
 * address was opened. Idempotent.
 */
export async function deleteSlotNetwork(net: SlotNet): Promise<void> {
  await deleteLinks(net);
  await setAllowedRanges(net.address, []);
}

async function deleteLinks(net: SlotNet): Promise<void> {
  if (await exists(net.netnsPath))
    await run('ip', ['netns', 'del', net.netns]).catch(async (err) => {
      // Another removal of the same sandbox (a replica dropped while the server closes) got there first.
      if (await exists(net.netnsPath)) throw err;
    });
  // The host end goes with its peer, but the kernel destroys a namespace asynchronously: wait for
  // it (a new pair of the same name cannot be made before), deleting it ourselves if it lingers. Polled through
  // the thread pool: a sysfs lookup waits on the kernel's network locks while namespaces go (decision 078).
  const hostIf = `/sys/class/net/${net.hostIf}`;
  const deadline = Date.now() + VETH_GONE_TIMEOUT_MS;
  for (let tried = false; await exists(hostIf); await sleep(2)) {
    if (!tried && Date.now() > deadline - VETH_GONE_TIMEOUT_MS / 2) {
      tried = true;
      await run('ip', ['link', 'del', net.hostIf]).catch(() => undefined);
    }
    if (Date.now() > deadline) throw new Error(`${net.hostIf} still exists after its namespace was deleted`);
  }
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

export function slotNetworkExists(net: SlotNet): boolean {
  return existsSync(net.netnsPath) && existsSync(`/sys/class/net/${net.hostIf}`);
}
