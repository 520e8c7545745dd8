// A cluster's leader died or was drained (docs/decisions/082-cluster-operations.md): the replicas it ran for agents,
// functions and applications went with it. The server taking the lead tells each of those objects so, naming the
// node, before its controllers start their replicas again (as a sandbox on a node that left is told:
// sandbox-lost.ts). What the node ran is what its last heartbeat as leader said (cluster/nodes.ts `ran`). Workloads
// whose replicas are placed over the nodes (086) are told by their placement instead, so each loss is said once.
import type { Resources } from '../../store/resources.js';
import { lostOnNode } from '../core/lost-node.js';

export async function tellLostReplicas(
  resources: Resources,
  self: string,
  ran: Map<string, [kind: string, workspace: string, name: string][]>,
): Promise<number> {
  let told = 0;
  for (const [node, objects] of ran)
    for (const [kind, workspace, name] of objects) {
      const key = { kind, workspace, parent: '', name };
      // Placed over the nodes (decision 086): its placement tells of the slot that moved, once, naming the node.
      const placed = (await resources.store.get(key))?.body.replicaNodes;
      if (Array.isArray(placed) && placed.length) continue;
      const written = await resources.recordEvent(
        key,
        lostOnNode(
          node,
          `this ${kind.toLowerCase()}'s replicas`,
          'their processes and memory are gone',
          `Node ${self} starts them again, up to its scale`,
        ),
      );
      if (written) told++;
    }
  return told;
}
