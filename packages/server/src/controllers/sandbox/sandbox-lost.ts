// A cluster's new leader (docs/decisions/056-cluster-postgres.md) takes over sandboxes whose instances ran on the
// server that led before it: their processes and memory stayed on that machine. Each such sandbox is told so in an
// event naming that node, before the controllers start it again here (fresh, as after a host reboot).
import type { RuntimeDriver } from '../../runtime/driver.js';
import { sandboxId } from '../../runtime/sandbox-id.js';
import type { Resources } from '../../store/resources.js';
import { EVERY_WORKSPACE, keyOf } from '../../store/store.js';

/** Records the loss on every running sandbox this server does not hold; returns how many it told. */
export async function reportLostSandboxes(deps: {
  resources: Resources;
  driver: Pick<RuntimeDriver, 'inspect'>;
  /** The nodes that led before this one (they held the instances). */
  formerHolders: string[];
  self: string;
}): Promise<number> {
  if (!deps.formerHolders.length) return 0;
  let told = 0;
  const from = deps.formerHolders.join(', ');
  for (const o of await deps.resources.store.list({ kind: 'Sandbox', workspace: EVERY_WORKSPACE })) {
    if (o.body.status !== 'DEPLOYED') continue;
    if (await deps.driver.inspect(sandboxId(o.workspace, o.name))) continue;
    await deps.resources.recordEvent(
      keyOf(o),
      `lost: node ${from}, which ran this sandbox, stopped; its processes, memory and files are gone. Node ${deps.self} starts it again, fresh`,
    );
    told++;
  }
  return told;
}
