// From a Sandbox object's spec to what the runtime driver runs. The only place secret envs are opened.
import { isDefaultImage } from '../../kinds/image-reference.js';
import { DEFAULT_SANDBOX_IMAGE, domainsOf, SANDBOX_MEMORY_MB } from '../../kinds/sandbox.js';
import { defaultCpuShares, type EgressPolicy, type SandboxSpec } from '../../runtime/driver.js';
import type { RoutingRule } from '../../runtime/egress/policy.js';
import type { ImageStore } from '../../runtime/images/image-store.js';
import type { Resources } from '../../store/resources.js';
import { gatewayOf } from '../config/egress-ip.js';

/** The image a spec without one runs: the runtime maps any image it has not installed to the host userland. */
export { DEFAULT_SANDBOX_IMAGE };
/**
 * Tasks (threads count) per sandbox: room for a dev server, a language server and a test runner at once,
 * while a fork bomb stays contained.
 */
export const SANDBOX_PIDS_MAX = 2048;

/**
 * The writable layer's cap equals the memory size: the layer is a tmpfs charged to the sandbox's memory
 * cgroup, so files count toward memory anyway; a larger cap would only turn "disk full" into an OOM kill.
 */
export const diskMbFor = (memoryMb: number) => memoryMb;

export function runtimeSpecOf(resources: Resources, spec: any): SandboxSpec {
  const open = resources.openSecrets(resources.kind('Sandbox'), spec ?? {});
  const memoryMb: number = open.runtime?.memory ?? SANDBOX_MEMORY_MB;
  const envs: Record<string, string> = {};
  for (const e of open.runtime?.envs ?? []) envs[e.name] = e.value ?? '';
  return {
    memoryMb,
    pidsMax: SANDBOX_PIDS_MAX,
    cpuShares: defaultCpuShares(memoryMb),
    diskMb: diskMbFor(memoryMb),
    envs,
    image: open.runtime?.image ?? DEFAULT_SANDBOX_IMAGE,
    // Filled by the controller once it holds them (volume-attach.ts): never started without them.
    volumes: [],
    egress: egressPolicyOf(open.network),
  };
}

/**
 * runtimeSpecOf, with the addresses of the egress IPs allocated from the sandbox's gateway (egress-ip.ts) when it
 * names one: the runtime gives the sandbox one of those (any of the gateway's pool when none is allocated).
 */
export async function sandboxRuntimeSpec(
  resources: Resources,
  workspace: string,
  spec: any,
): Promise<SandboxSpec> {
  const out = runtimeSpecOf(resources, spec);
  const gateway = out.egress?.egressGateway;
  if (!out.egress || !gateway) return out;
  const ips = await resources.store.list({ kind: 'EgressIp', workspace });
  const pool = ips
    .filter((ip) => gatewayOf(ip) === gateway && ip.body.status === 'DEPLOYED' && ip.body.spec?.publicIp)
    .map((ip) => ip.body.spec.publicIp as string)
    .sort();
  if (pool.length) out.egress = { ...out.egress, egressPool: pool };
  return out;
}

/**
 * The runtime spec of `workspace`'s sandbox with its image resolved there (docs/decisions/037): the default image as
 * it is; any other name becomes the id of the workspace's own image of that name, else of what the name's registry
 * served (pulled now if nothing was); an id must be one the workspace holds. The runtime is handed ids only. Throws
 * ImageError when the image cannot be had.
 */
export async function withImage(
  images: ImageSource,
  workspace: string,
  spec: SandboxSpec,
): Promise<SandboxSpec> {
  if (isDefaultImage(spec.image)) return spec;
  return { ...spec, image: (await images.resolve(workspace, spec.image)).id };
}

/** Where withImage has an image from: this server's store, or in a cluster the leader's through it (peer-images.ts). */
export interface ImageSource {
  resolve(workspace: string, nameOrId: string): Promise<{ id: string }>;
}

/** withImage without pulling or recording anything: undefined when the image is not had yet (or never can be). */
export function withImageNow(
  images: ImageStore,
  workspace: string,
  spec: SandboxSpec,
): SandboxSpec | undefined {
  if (isDefaultImage(spec.image)) return spec;
  try {
    const image = images.peek(workspace, spec.image);
    return image && { ...spec, image: image.id };
  } catch {
    return undefined; // a malformed name: the start that follows fails saying why
  }
}

/**
 * What a spec asks that this runtime does not do, in one sentence for the sandbox's events (undefined when
 * nothing): the service's kernel variants (`extraArgs`), snapshots, and a stop grace period.
 */
export function unappliedRuntimeFields(spec: any): string | undefined {
  const rt = spec?.runtime ?? {};
  const out: string[] = [];
  const args = Object.entries((rt.extraArgs ?? {}) as Record<string, string>);
  if (args.length)
    out.push(
      `runtime.extraArgs ${args.map(([k, v]) => `${k}=${v}`).join(', ')} (sandboxes here share the host kernel: there are no kernel variants, and a sandbox cannot change its own firewall)`,
    );
  if (rt.snapshotEnabled) out.push('runtime.snapshotEnabled (this server has no snapshots)');
  if (rt.terminationGracePeriodSeconds)
    out.push('runtime.terminationGracePeriodSeconds (a stopped sandbox is killed at once)');
  return out.length ? `not applied: ${out.join('; ')}` : undefined;
}

/**
 * The domain policy of a spec's `network`: the top-level lists (the SDK's older form) and `proxy`'s together.
 * Undefined when neither lists anything: such a sandbox keeps the open egress of the host's network settings.
 */
export function egressPolicyOf(network: any): EgressPolicy | undefined {
  if (!network) return undefined;
  const allowedDomains = [...domainsOf(network.allowedDomains), ...domainsOf(network.proxy?.allowedDomains)];
  // egress.policies: named allow/deny rules over destinations. Domains join the lists; IPv4 addresses and ranges
  // of allow rules open raw TCP to them (other address destinations: unenforcedNetworkFields names them).
  const rules: any[] = network.egress?.policies ?? [];
  const ruleDests = (mode: string) =>
    rules.filter((r) => (r.mode ?? 'allow') === mode).flatMap((r) => (r.destinations ?? []) as unknown[]);
  const ruleDomains = (mode: string) => ruleDests(mode).filter(isDomainPattern) as string[];
  const rawCidrs = ruleDests('allow')
    .map(ipv4Cidr)
    .filter((c): c is string => !!c);
  allowedDomains.push(...ruleDomains('allow'));
  const forbiddenDomains = [
    ...domainsOf(network.forbiddenDomains),
    ...domainsOf(network.proxy?.forbiddenDomains),
    ...ruleDomains('deny'),
  ];
  const bypass: string[] = (network.proxy?.bypass ?? []).filter(isDomainPattern);
  const routing: RoutingRule[] = (network.proxy?.routing ?? [])
    .map((r: any) => ({
      destinations: r.destinations ?? [],
      headers: injectedMap(r.headers),
      body: injectedMap(r.body),
      secrets: r.secrets ?? {},
    }))
    .filter((r: RoutingRule) => r.destinations.length);
  // A gateway only applies to what leaves through the proxy, so a sandbox with one is under a policy too.
  const egressGateway: string | undefined =
    network.egress?.mode !== 'direct' ? network.egress?.gateway : undefined;
  if (
    !allowedDomains.length &&
    !forbiddenDomains.length &&
    !routing.length &&
    !egressGateway &&
    !rawCidrs.length
  )
    return undefined;
  return {
    allowedDomains,
    forbiddenDomains,
    ...(routing.length ? { routing } : {}),
    ...(bypass.length && routing.length ? { bypass } : {}),
    ...(rawCidrs.length ? { rawCidrs } : {}),
    ...(egressGateway ? { egressGateway } : {}),
  };
}

/** headers/body: the SDK's map, or the specification's string form (JSON, or `Name: value` lines). */
function injectedMap(v: unknown): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, String(x)]));
  const text = String(v).trim();
  if (!text) return undefined;
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed === 'object') return injectedMap(parsed);
  } catch {}
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/** A domain pattern (`*`, `*.x`, a name), not an address or a range: what the proxy and Berth's DNS can match. */
const isDomainPattern = (d: unknown) =>
  typeof d === 'string' && d.trim() !== '' && !/^[\d.]+$/.test(d.trim()) && !/[/:[\]]/.test(d);

/** `a.b.c.d` or `a.b.c.d/n` as a CIDR nftables accepts (host bits cleared), undefined for anything else. */
export function ipv4Cidr(d: unknown): string | undefined {
  const m =
    typeof d === 'string'
      ? /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(d.trim())
      : null;
  if (!m) return undefined;
  const octets = m.slice(1, 5).map(Number);
  const len = m[5] === undefined ? 32 : Number(m[5]);
  if (octets.some((o) => o > 255) || len > 32) return undefined;
  const n = octets.reduce((a, o) => a * 256 + o, 0);
  const size = 2 ** (32 - len);
  const base = n - (n % size);
  return `${[base >>> 24, (base >>> 16) & 255, (base >>> 8) & 255, base & 255].join('.')}/${len}`;
}

/** Fields of `network` stored but not acted on yet, named in the sandbox's status message so none passes silently. */
export function unenforcedNetworkFields(network: any): string[] {
  const out: string[] = [];
  // Allowed IPv4 ranges are raw TCP rules; deny ranges and IPv6 are not enforced.
  const ranges = (network?.egress?.policies ?? []).flatMap((r: any) =>
    (r.destinations ?? []).filter(
      (d: unknown) => !isDomainPattern(d) && !((r.mode ?? 'allow') === 'allow' && ipv4Cidr(d)),
    ),
  );
  if (ranges.length)
    out.push(`network.egress.policies destinations that are addresses (${ranges.join(', ')})`);
  return out;
}

/** The suffix a DEPLOYED message gets when the spec has network fields the runtime does not enforce yet. */
export function unenforcedNote(spec: any): string {
  const fields = unenforcedNetworkFields(spec?.network);
  return fields.length ? `; not enforced yet: ${fields.join(', ')}` : '';
}
