// The driver's side of egress policies (runtime/egress): which sandbox addresses are policed in nftables, what
// the egress child knows about each, and the environment that points a sandbox's programs at the proxy.
import type { EgressPolicy } from '../egress/policy.js';
import { type EgressEvent, EgressSupervisor } from '../egress/supervisor.js';
import { EGRESS_PORTS, setEgressControl } from './network.js';

export interface EgressControlOptions {
  /** DNS servers the egress child asks for allowed names (default: the host's resolver, /etc/hosts included). */
  resolvers?: string[];
  /** The server's BERTH_SANDBOX_ALLOW_CIDRS: private ranges the proxy may dial too. */
  allowCidrs?: string[];
  onEvent?: (e: EgressEvent) => void;
}

export class EgressControl {
  readonly supervisor: EgressSupervisor;

  constructor(opts: EgressControlOptions = {}) {
    this.supervisor = new EgressSupervisor(
      { ports: EGRESS_PORTS, resolvers: opts.resolvers, allowCidrs: opts.allowCidrs },
      opts.onEvent,
    );
  }

  /**
   * Puts the sandbox at `address` under `policy` (or frees it when undefined). The child learns a policy before
   * the address is policed, and the address is freed before the child forgets it: in between the sandbox is
   * refused, never let through.
   */
  async apply(address: string, policy: EgressPolicy | undefined): Promise<void> {
    if (policy) {
      await this.supervisor.set(address, policy);
      await setEgressControl(address, true);
    } else {
      await setEgressControl(address, false);
      this.supervisor.forget(address);
    }
  }

  close(): Promise<void> {
    return this.supervisor.close();
  }
}

/** Proxy variables for programs that honour them (better errors: a 403 naming the reason); the rest are redirected. */
export function egressEnv(hostAddress: string): Record<string, string> {
  const proxy = `http://${hostAddress}:${EGRESS_PORTS.explicit}`;
  const noProxy = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
  };
}

export const samePolicy = (a?: EgressPolicy, b?: EgressPolicy) => JSON.stringify(a) === JSON.stringify(b);
