// The controllers' leader decides how many replica slots each agent, function and application keeps and on which nodes
// (docs/decisions/086-replicas-across-nodes.md): its minScale (at least one), spread over the live nodes of its region
// (different nodes first, those with its app built next, then the least loaded), recorded on the object as
// `replicaNodes`. A slot on a node that left (lease lapsed, drained) or that no longer serves the workload's region
// moves to another node, after an event naming the node when it died; a scale change adds or drops slots. The nodes
// themselves start and remove the replicas (replica-holding.ts). A workload whose slots have nowhere to go stays
// placed where it is.
import type { InstanceHolder } from '../../cluster/instance-holder.js';
import {
  placeable,
  placeSlots,
  type ReplicaPlacements,
  serves,
  servingKey,
  slotsOf,
} from '../../cluster/replica-placements.js';
import type { Resources } from '../../store/resources.js';
import type { StoredObject } from '../../store/store.js';
import { lostOnNode } from '../core/lost-node.js';

export interface ReplicaPlacementDeps {
  resources: Resources;
  placements: ReplicaPlacements;
  holder: () => InstanceHolder | undefined;
}

const same = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

const nodesOf = (o: StoredObject): string[] =>
  Array.isArray(o.body.replicaNodes) ? o.body.replicaNodes : [];

/** One pass over every placed workload; returns how many were placed (again). */
export async function placeReplicas(deps: ReplicaPlacementDeps): Promise<number> {
  const holder = deps.holder();
  if (!holder) return 0;
  let written = 0;
  for (const o of [...deps.placements.objects()]) {
    if (!placeable(o) || !serves(o)) continue;
    const current = nodesOf(o);
    const key = servingKey(o.kind, o.workspace, o.name);
    const next = placeSlots(
      current,
      slotsOf(o),
      (n) => holder.keepsReplica(n, o.body),
      holder.replicaCandidates(o.body, key),
      deps.placements.slotsOn,
    );
    // No node of its region to go to: its slots stay where they are until one can take them.
    if (next === current || next.length === 0) continue;
    const d = await deps.resources.updateStatus(
      { kind: o.kind, workspace: o.workspace, parent: '', name: o.name },
      { extras: { replicaNodes: next }, when: (cur) => same(nodesOf(cur), current) && serves(cur) },
    );
    if (!d) continue;
    written++;
    const moved = [...new Set(current.filter((n) => !next.includes(n)))];
    for (const from of moved) {
      // Scaled in, or drained: nothing was lost.
      if (holder.keepsReplica(from, o.body) || holder.node(from)?.drained) continue;
      const to = [...new Set(next.filter((n) => !current.includes(n)))];
      if (to.length === 0) continue;
      // Other slots on nodes still in the placement answer meanwhile; a workload that had only this one waits.
      const others = current.some((n) => n !== from && !moved.includes(n));
      await deps.resources.recordEvent(
        { kind: o.kind, workspace: o.workspace, parent: '', name: o.name },
        lostOnNode(
          from,
          `a replica of this ${o.kind.toLowerCase()}`,
          others
            ? 'its processes and memory are gone; the replicas on other nodes go on answering'
            : 'its processes and memory are gone; calls wait for the replica started again',
          `Node ${to.join(', ')} starts it again, up to its scale`,
        ),
      );
    }
  }
  return written;
}

/** Runs `placeReplicas` every `everyMs` until stopped. */
export function placeReplicasEvery(
  deps: ReplicaPlacementDeps & { everyMs: number; warn: (err: unknown, msg: string) => void },
): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    running = placeReplicas(deps)
      .catch((err) => deps.warn(err, 'could not place the replicas of agents, functions and applications'))
      .finally(() => {
        busy = false;
      });
  }, deps.everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
