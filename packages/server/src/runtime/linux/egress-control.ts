// The driver's side of egress policies (runtime/egress): which sandbox addresses are policed in nftables, what
// the egress child knows about each, each sandbox's interception CA and trust bundle, and the environment that
// points a sandbox's programs at the proxy and the bundle.
import { createHash } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import { rootCertificates } from 'node:tls';
import { type CaMaterial, mintCa } from '../egress/ca.js';
import type { EgressPolicy } from '../egress/policy.js';
import { type EgressEvent, EgressSupervisor } from '../egress/supervisor.js';
import { SANDBOX_SOCKET_DIR } from './launch.js';
import { DEFAULT_EGRESS_PORTS, type EgressPorts } from './egress-ports.js';
import { releaseEgressPorts, setEgressControl, setRawEgress } from './network.js';
import { writeRunFile } from './run-file.js';

export interface EgressControlOptions {
  /** This server's egress ports (egress-ports.ts; default: the documented ones). */
  ports?: EgressPorts;
  /** DNS servers the egress child asks for allowed names (default: the host's resolver, /etc/hosts included). */
  resolvers?: string[];
  /** The server's BERTH_SANDBOX_ALLOW_CIDRS: private ranges the proxy may dial too. */
  allowCidrs?: string[];
  /** Extra CAs (PEM file) the proxy trusts for upstreams of intercepted requests. */
  upstreamCaFile?: string;
  /** Egress gateways: name → host-local addresses handed out to sandboxes (BERTH_EGRESS_GATEWAYS). */
  gateways?: Record<string, string[]>;
  onEvent?: (e: EgressEvent) => void;
}

/** Where a sandbox's files and addresses are, for applying a policy to it. */
export interface EgressTarget {
  address: string;
  hostAddress: string;
  /** Host path of its run dir (bound at /run/berth inside). */
  runDir: string;
  uid: number;
  /** Names the CA (the sandbox id). */
  label: string;
}

/** Inside the sandbox: the interception CA alone, and the CA with the public roots (for stores that replace). */
export const EGRESS_CA_FILE = 'egress-ca.pem';
export const EGRESS_BUNDLE_FILE = 'egress-ca-bundle.pem';

export class EgressControl {
  readonly supervisor: EgressSupervisor;
  private readonly cas = new Map<string, { ca: CaMaterial; key: string }>();
  private readonly gateways: Record<string, string[]>;
  readonly ports: EgressPorts;

  constructor(opts: EgressControlOptions = {}) {
    this.gateways = opts.gateways ?? {};
    this.ports = opts.ports ?? DEFAULT_EGRESS_PORTS;
    this.supervisor = new EgressSupervisor(
      {
        ports: this.ports,
        resolvers: opts.resolvers,
        allowCidrs: opts.allowCidrs,
        upstreamCaFile: opts.upstreamCaFile,
      },
      opts.onEvent,
    );
  }

  /** The policy in force for the sandbox at `address` (secrets included: for comparing only). */
  current(address: string): EgressPolicy | undefined {
    return this.supervisor.current(address);
  }

  /**
   * Puts the sandbox under `policy`; returns the environment its processes need. The child learns the policy
   * before the address is policed: in between the sandbox is refused, never let through. With routing rules the
   * sandbox gets a CA (minted again when the destinations change, since they are its name constraints) and the
   * trust files in its run dir.
   */
  async apply(t: EgressTarget, requested: EgressPolicy): Promise<Record<string, string>> {
    const policy = {
      ...requested,
      egressAddress: this.egressAddressFor(t.label, requested.egressGateway, requested.egressPool),
    };
    let ca: CaMaterial | undefined;
    const destinations = [...new Set((policy.routing ?? []).flatMap((r) => r.destinations))].sort();
    if (destinations.length) {
      const key = destinations.join(',');
      const held = this.cas.get(t.address);
      ca = held?.key === key ? held.ca : await mintCa(t.label, destinations);
      this.cas.set(t.address, { ca, key });
      writeRunFile(t.runDir, t.uid, EGRESS_CA_FILE, ca.certPem, 0o644);
      writeRunFile(t.runDir, t.uid, EGRESS_BUNDLE_FILE, [ca.certPem, ...rootCertificates].join('\n'), 0o644);
    } else this.cas.delete(t.address);
    await this.supervisor.set(t.address, policy, ca);
    // Raw rules before the address is policed: nothing the policy allows is refused in between.
    await setRawEgress(t.address, { cidrs: policy.rawCidrs ?? [], snat: policy.egressAddress });
    await setEgressControl(t.address, this.ports);
    return egressEnv(t.hostAddress, this.ports.explicit, !!ca);
  }

  /**
   * The gateway address upstreams see for this sandbox: one of the gateway's pool, the same for the same sandbox
   * (APIs tie sessions and rate limits to the source address). Thrown: an unknown gateway or an address the host
   * does not have (binding it would fail for every connection).
   */
  private egressAddressFor(
    label: string,
    gateway: string | undefined,
    allocated: string[] | undefined,
  ): string | undefined {
    if (!gateway) return undefined;
    const configured = this.gateways[gateway];
    // Allocated egress IPs narrow the pool; one no longer in the server's settings is not handed out.
    const narrowed = allocated?.filter((a) => configured?.includes(a));
    const pool = narrowed?.length ? narrowed : configured;
    if (!pool?.length)
      throw new Error(`egress gateway ${gateway} is not configured on this server (BERTH_EGRESS_GATEWAYS)`);
    const address = pool[createHash('sha256').update(label).digest().readUInt32BE(0) % pool.length];
    const local = Object.values(networkInterfaces()).some((l) => l?.some((a) => a.address === address));
    if (!local)
      throw new Error(`egress gateway ${gateway}: address ${address} is not an address of this host`);
    return address;
  }

  /** Frees the sandbox at `address` from egress control: policed no more, then forgotten by the child. */
  async release(address: string): Promise<void> {
    await setEgressControl(address, undefined);
    await setRawEgress(address, undefined);
    this.supervisor.forget(address);
    this.cas.delete(address);
  }

  async close(): Promise<void> {
    await this.supervisor.close();
    await releaseEgressPorts(this.ports);
  }
}

/**
 * Proxy variables for programs that honour them (better errors: a 403 naming the reason; the rest are redirected)
 * and, with interception, the trust variables of the common TLS stacks. All but NODE_EXTRA_CA_CERTS replace the
 * store they name, so they point at the bundle (CA and public roots); Node's adds to its own, so it gets the CA.
 */
export function egressEnv(
  hostAddress: string,
  proxyPort: number,
  intercepting: boolean,
): Record<string, string> {
  const proxy = `http://${hostAddress}:${proxyPort}`;
  const noProxy = 'localhost,127.0.0.1,::1';
  const env: Record<string, string> = {
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
  };
  if (!intercepting) return env;
  const bundle = `${SANDBOX_SOCKET_DIR}/${EGRESS_BUNDLE_FILE}`;
  for (const k of [
    'SSL_CERT_FILE',
    'CURL_CA_BUNDLE',
    'REQUESTS_CA_BUNDLE',
    'GIT_SSL_CAINFO',
    'PIP_CERT',
    'NPM_CONFIG_CAFILE',
    'npm_config_cafile',
    'AWS_CA_BUNDLE',
    'CARGO_HTTP_CAINFO',
    'DENO_CERT',
  ])
    env[k] = bundle;
  env.NODE_EXTRA_CA_CERTS = `${SANDBOX_SOCKET_DIR}/${EGRESS_CA_FILE}`;
  return env;
}

/** Every variable egressEnv may set: removed from a sandbox's env before a new policy's are added. */
export const EGRESS_ENV_KEYS = Object.keys(egressEnv('0.0.0.0', 0, true));

/** Equal as requested: the address the runtime picked from a gateway is not part of the request. */
export const samePolicy = (a?: EgressPolicy, b?: EgressPolicy) =>
  JSON.stringify(a && { ...a, egressAddress: undefined }) ===
  JSON.stringify(b && { ...b, egressAddress: undefined });
