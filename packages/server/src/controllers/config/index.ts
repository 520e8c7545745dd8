// Configuration kinds: models (their connection and policies checked), egress IPs (an address allocated from their
// gateway's pool), and the kinds with nothing to run (VPCs, egress gateways: deployed once their checks pass).
import type { ControllerDeps } from '../core/events.js';
import type { Reconciler } from '../core/reconciler.js';
import { egressIpReconciler } from './egress-ip.js';
import { modelReconciler } from './model.js';

export { CONFIG_PROFILES } from './config-kinds.js';

export const CONFIG_RECONCILERS: Record<string, (deps: ControllerDeps) => Reconciler> = {
  Model: (d) => modelReconciler(d),
  EgressIp: (d) => egressIpReconciler(d),
};
