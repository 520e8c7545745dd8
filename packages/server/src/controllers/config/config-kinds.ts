// The checks of configuration-only kinds: what makes one of them FAILED instead of DEPLOYED.
// Integration connections and volume templates have no status (§2.13, §2.11), so no reconciler.
import type { ConfigProfile } from '../core/lifecycle.js';

export const CONFIG_PROFILES: Record<string, ConfigProfile> = {
  Vpc: { deployedMessage: 'network configured' },
  EgressGateway: {
    // The API checks the region at write time; this catches a server restarted with fewer regions.
    check(o, { resources }) {
      const region = o.body.spec?.region;
      if (region !== undefined && !resources.regions.includes(region))
        return `region ${JSON.stringify(region)} is not configured on this server; known: ${resources.regions.join(', ')} (settings BERTH_REGIONS and BERTH_REGION_ALIASES)`;
    },
    deployedMessage: (o, { resources }) => {
      const pool = resources.egressGateways[o.name] ?? [];
      return pool.length
        ? `egress from ${pool.length} host address${pool.length > 1 ? 'es' : ''} (${pool.join(', ')})`
        : 'no address pool on this server (setting BERTH_EGRESS_GATEWAYS): its egress IPs cannot be allocated';
    },
  },
  // EgressIp has its own reconciler (egress-ip.ts): it allocates.
};
