// Deep standby said on the sandbox as an event (decision 058): its status stays STANDBY (a request wakes it the
// same way), and the event says its memory went to swap, how much, and what a wake costs now.
import type { Logger } from 'pino';
import type { DeepStandbyEvent, RuntimeDriver } from '../../runtime/driver.js';
import type { Resources } from '../../store/resources.js';

const mib = (bytes: number) => (bytes / (1024 * 1024)).toFixed(1);

export function deepStandbyMessage(e: DeepStandbyEvent): string {
  return (
    `deep standby: ${mib(Math.max(0, e.beforeBytes - e.afterBytes))} MiB of memory pushed out to swap, ` +
    `${mib(e.afterBytes)} MiB stays (kernel memory of its processes, and its API daemon where BERTH_DEEP_STANDBY_DAEMON is resident). Processes, files and address are kept; ` +
    'the next request wakes it as from standby, and its pages come back from swap as they are used'
  );
}

export async function sayDeepStandby(
  deps: { resources: Resources; driver: RuntimeDriver; logger: Logger },
  e: DeepStandbyEvent,
): Promise<void> {
  const owner = (await deps.driver.inspect(e.id))?.owner;
  deps.logger.info(
    { sandbox: e.id, owner, beforeBytes: e.beforeBytes, afterBytes: e.afterBytes },
    'sandbox deep standby',
  );
  if (owner?.kind !== 'Sandbox') return;
  await deps.resources
    .recordEvent(
      { kind: 'Sandbox', workspace: owner.workspace, parent: '', name: owner.name },
      deepStandbyMessage(e),
    )
    .catch((err) => deps.logger.warn({ err }, 'could not record the deep standby event'));
}
