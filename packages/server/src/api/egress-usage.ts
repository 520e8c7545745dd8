// GET /v0/egressgateways/usage: which of the workspace's sandboxes leave through which egress gateway, as
// `{ gatewayName: [sandboxName, ...] }` (the service's shape), with the addresses of each gateway's egress IPs
// under `GET /vpcs/{vpc}/egressgateways/{gateway}/ips`. A sandbox counts when its spec names the gateway
// (`network.egress.gateway`, mode not `direct`), whatever its status.
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import type { Resources } from '../store/resources.js';

export function register(v0: FastifyInstance, deps: { resources: Resources }) {
  v0.get('/egressgateways/usage', async (req) => {
    const a = requireRole(req, 'viewer');
    return usageOf(await deps.resources.store.list({ kind: 'Sandbox', workspace: a.workspace }));
  });
}

/** Gateway name → the sandboxes on it, names sorted; gateways no sandbox uses are absent. */
export function usageOf(
  sandboxes: Array<{ name: string; body: Record<string, any> }>,
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const s of sandboxes) {
    const egress = s.body.spec?.network?.egress;
    const gateway = egress?.mode !== 'direct' ? egress?.gateway : undefined;
    if (typeof gateway !== 'string' || !gateway) continue;
    out[gateway] ??= [];
    out[gateway].push(s.name);
  }
  for (const names of Object.values(out)) names.sort();
  return out;
}
