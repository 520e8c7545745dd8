// Agents, functions and applications as the owners of their runtime instances (runtime/instances.ts). A replica an earlier
// server left is wanted while its workload still serves its revision (active or canary) from an app the workspace
// holds (decision 029): it is kept for that workload's next deploy to take over (ReplicaSet.holdLeftovers). Builds
// run again from their source, so no build step's instance is wanted after a restart.
import type { Builder } from '../../builds/builder.js';
import { BUILD_ID_PREFIX } from '../../builds/sandbox-step.js';
import type { OwnerRegistration } from '../../runtime/instances.js';
import type { Store } from '../../store/store.js';
import { REPLICA_ID_PREFIX, type ReplicaSet } from './replicas.js';
import { wantedReplicaPrefixes } from './deploy.js';

export function workloadOwner(deps: {
  store: Store;
  builder: Builder;
  replicas: ReplicaSet;
}): OwnerRegistration {
  return {
    kinds: ['Agent', 'Function', 'Application'],
    legacyRole: (id) =>
      id.startsWith(REPLICA_ID_PREFIX) ? 'replica' : id.startsWith(BUILD_ID_PREFIX) ? 'build' : undefined,
    async keep(instances) {
      const wanted = await wantedReplicaPrefixes(
        deps.store,
        (ws, app) => deps.builder.builtByKey(ws, app) !== undefined,
      );
      const kept = instances.filter(
        (i) =>
          i.role === 'replica' && i.state !== 'dead' && wanted.has(i.id.slice(0, i.id.lastIndexOf('-') + 1)),
      );
      deps.replicas.holdLeftovers(kept);
      return kept.map((i) => i.id);
    },
  };
}
