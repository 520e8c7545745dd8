// Egress IPs: an address handed out from its gateway's pool (the server setting BERTH_EGRESS_GATEWAYS names each
// gateway's host-local addresses) and reported in `spec.publicIp`. No free address, no pool for the gateway, or an
// address this host does not have: FAILED with the reason. Deleting an egress IP frees its address.
import { networkInterfaces } from 'node:os';
import { isGone } from '../../kinds/status.js';
import { keyOf, type StoredObject, EVERY_WORKSPACE } from '../../store/store.js';
import { type ControllerDeps, stillDeploying, transition } from '../core/events.js';
import { deactivate, finishDeletion } from '../core/lifecycle-steps.js';
import { DONE, type Reconciler, TerminalError } from '../core/reconciler.js';

/** The gateway of an egress IP: its parent is `vpc/gateway`. */
export const gatewayOf = (o: { parent: string }) => o.parent.split('/')[1] ?? '';

export function egressIpReconciler(deps: ControllerDeps): Reconciler {
  // Choosing a free address and writing it are one step per server: two egress IPs reconciled at once would
  // otherwise both see the same address free.
  let allocating: Promise<unknown> = Promise.resolve();
  const serialised = <T>(step: () => Promise<T>): Promise<T> => {
    const run = allocating.then(step, step);
    allocating = run.catch(() => undefined);
    return run;
  };
  return {
    // Another egress IP deleted may free an address a FAILED one is waiting for.
    watches: ['EgressIp'],
    async reconcile(key) {
      const o = await deps.resources.store.get(key);
      if (!o) return DONE;
      if (isGone(o)) return finishDeletion(deps, o);
      if (o.body.spec?.enabled === false) {
        await deactivate(deps, o);
        return DONE;
      }
      const gateway = gatewayOf(o);
      const pool = deps.resources.egressGateways[gateway] ?? [];
      if (!pool.length)
        throw new TerminalError(
          `egress gateway ${gateway} has no address pool on this server (setting BERTH_EGRESS_GATEWAYS, e.g. ${gateway}=198.51.100.5)`,
        );
      const held: string | undefined = o.body.spec?.publicIp;
      const address = await serialised(async () => {
        const a = held && pool.includes(held) ? held : await allocate(deps, o, pool);
        if (!hostHas(a))
          throw new TerminalError(`address ${a} of egress gateway ${gateway} is not an address of this host`);
        // A spec field only the server writes (the kind's readOnlySpec), written through the status verb.
        if (held !== a) await deps.resources.updateStatus(keyOf(o), { spec: { '/publicIp': a } });
        return a;
      });
      if (o.body.status === 'DEPLOYED' && held === address) return DONE;
      const d = await transition(deps, o, 'DEPLOYING', `allocating from egress gateway ${gateway}`);
      if (d)
        await transition(
          deps,
          d,
          'DEPLOYED',
          `allocated ${address} from egress gateway ${gateway}`,
          stillDeploying,
        );
      return DONE;
    },
  };
}

/**
 * The first address of the pool no other egress IP of a gateway of that name holds (pools are the server's, so
 * every workspace's gateways of that name share one). Thrown when every address is taken.
 */
async function allocate(deps: ControllerDeps, o: StoredObject, pool: string[]): Promise<string> {
  const gateway = gatewayOf(o);
  const others = await deps.resources.store.list({ workspace: EVERY_WORKSPACE, kind: 'EgressIp' });
  const taken = new Set(
    others
      .filter(
        (x) =>
          gatewayOf(x) === gateway &&
          !(x.workspace === o.workspace && x.parent === o.parent && x.name === o.name),
      )
      .map((x) => x.body.spec?.publicIp)
      .filter(Boolean),
  );
  const free = pool.find((a) => !taken.has(a));
  if (!free)
    throw new TerminalError(
      `egress gateway ${gateway} has no free address: all ${pool.length} of its pool are allocated`,
    );
  return free;
}

function hostHas(address: string): boolean {
  return Object.values(networkInterfaces()).some((l) => l?.some((a) => a.address === address));
}
