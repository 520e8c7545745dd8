// A cluster's sandboxes on a node that left (docs/decisions/059-cluster-placement.md): its lease lapsed (killed, cut
// off from the database, stopped for longer than its lease) or an operator drained it. Their processes and memory
// stayed on that machine. The controllers' leader places each again on a healthy node, which starts it fresh, after
// telling a running one so in an event naming the node that held it. A sandbox not placed yet (created before
// placement existed) is placed here too.
import type { SandboxPlacements } from '../../cluster/placement.js';
import type { Resources } from '../../store/resources.js';
import type { ResourceKey } from '../../store/store.js';

/** The run states a sandbox loses its processes and memory from. */
const RUNNING = new Set(['DEPLOYED', 'DEPLOYING', 'UNARCHIVING']);

export interface PlaceAgainDeps {
  resources: Resources;
  placements: SandboxPlacements;
  /** Whether the sandboxes on `node` must go elsewhere (instance-holder.ts); `''`: not placed yet. */
  mustLeave: (node: string) => boolean;
  place: (body: any) => string;
}

/** One pass; returns how many sandboxes were placed (again). */
export async function placeAgain(deps: PlaceAgainDeps): Promise<number> {
  const moves: [ResourceKey, string][] = [];
  for (const [workspace, name, node] of deps.placements.placed())
    if (deps.mustLeave(node)) moves.push([{ kind: 'Sandbox', workspace, parent: '', name }, node]);
  let placed = 0;
  for (const [key, from] of moves) {
    const o = await deps.resources.store.get(key);
    if (!o || (o.body.node ?? '') !== from || o.body.status === 'TERMINATED') continue;
    const to = deps.place(o.body);
    const lost =
      from && RUNNING.has(o.body.status)
        ? `lost: node ${from}, which ran this sandbox, stopped; its processes, memory and files are gone. Node ${to} starts it again, fresh`
        : undefined;
    // A DEPLOYED one is DEPLOYING in the same write that moves it: read as DEPLOYED on its new node before that node
    // started it, its address would answer "not running" instead of "starting".
    const restart = o.body.status === 'DEPLOYED';
    if (lost && !restart) await deps.resources.recordEvent(key, lost);
    // Only if no other pass moved it meanwhile, and nothing else changed its status: one node starts it.
    const d = await deps.resources.updateStatus(key, {
      ...(restart ? { to: 'DEPLOYING', message: lost ?? `placed on node ${to}, which starts it` } : {}),
      extras: { node: to },
      when: (cur) => (cur.body.node ?? '') === from && cur.body.status === o.body.status,
    });
    if (d) placed++;
  }
  return placed;
}

/** Runs `placeAgain` every `everyMs` until stopped. */
export function placeAgainEvery(
  deps: PlaceAgainDeps & { everyMs: number; warn: (err: unknown, msg: string) => void },
): { stop(): Promise<void> } {
  let pass: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    pass ??= placeAgain(deps)
      .catch((err) => deps.warn(err, 'placing the sandboxes of a node that left failed'))
      .finally(() => {
        pass = undefined;
      });
  }, deps.everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await pass;
    },
  };
}
