// A cluster's sandboxes on a node that left (docs/decisions/059-cluster-placement.md): its lease lapsed (killed, cut
// off from the database, stopped for longer than its lease) or an operator drained it. Their processes and memory
// stayed on that machine. The controllers' leader places each again on a healthy node, which starts it fresh, after
// telling a running one so in an event naming the node that held it. A sandbox not placed yet (created before
// placement existed) is placed here too.
import { NoNodeError, type SandboxPlacements } from '../../cluster/placement.js';
import type { Resources } from '../../store/resources.js';
import type { ResourceKey } from '../../store/store.js';
import { lostOnNode } from '../core/lost-node.js';

/** The run states a sandbox loses its processes and memory from. */
const RUNNING = new Set(['DEPLOYED', 'DEPLOYING', 'UNARCHIVING']);

export interface PlaceAgainDeps {
  resources: Resources;
  placements: SandboxPlacements;
  /** Whether the sandboxes on `node` must go elsewhere (instance-holder.ts); `''`: not placed yet. */
  mustLeave: (node: string) => boolean;
  /** Throws NoNodeError when no node of the sandbox's region can take it (it then stays where it is). */
  place: (body: any, workspace: string) => string;
  /** Sandboxes told they wait for a node of their region (`<workspace>/<name>`), so each is told once. */
  waiting?: Set<string>;
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
    let to: string;
    try {
      to = deps.place(o.body, o.workspace);
    } catch (err) {
      if (!(err instanceof NoNodeError)) throw err;
      // Never started in another region: it stays placed on the node that left until a node of its region can take
      // it, or that node holds a lease again (it then takes up what is still placed on it).
      const id = `${key.workspace}/${key.name}`;
      if (deps.waiting?.has(id)) continue;
      deps.waiting?.add(id);
      await deps.resources.recordEvent(
        key,
        from
          ? `node ${from}, which holds this sandbox, is leaving (its lease lapsed or it was drained), and ${err.message}: the sandbox stays placed on node ${from} until a node of its region can take it`
          : `${err.message}: the sandbox is placed once a node of its region can take it`,
      );
      continue;
    }
    deps.waiting?.delete(`${key.workspace}/${key.name}`);
    const lost =
      from && RUNNING.has(o.body.status)
        ? lostOnNode(
            from,
            'this sandbox',
            'its processes, memory and files are gone',
            `Node ${to} starts it again, fresh`,
          )
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
  deps.waiting ??= new Set();
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
