// The server's stop, in this order: what acts (the holder, schedules, fault watch, controllers, the lead, the node
// record) first, then the gateway, builds, the HTTP server, the runtime, tokens, the outbound client and the store.
import type { CodeCopies } from '../builds/code-copies.js';
import type { BuildsAhead } from '../controllers/code/builds-ahead.js';
import type { ImagesAhead } from '../runtime/images/images-ahead.js';
import type { Late } from './context.js';
import type { Controllers } from './controllers.js';
import type { Gateway } from './gateway.js';
import type { Http } from './http.js';
import type { Runtime } from './runtime.js';
import type { Core } from './store.js';
import type { Workloads } from './workloads.js';

export async function closeServer(
  late: Late,
  gateway: Gateway,
  parts: Core &
    Runtime &
    Http &
    Workloads &
    Controllers & { codeCopies?: CodeCopies; buildsAhead?: BuildsAhead; imagesAhead?: ImagesAhead },
) {
  const { logger, outbound, store, quotas, placements, volumeNodes, tokens } = parts;
  const { driver } = parts;
  const { app } = parts;
  const { builds, codeCopies, buildsAhead, imagesAhead } = parts;
  const {
    leadership,
    sandboxControllers,
    faults,
    schedules,
    replicaHolding,
    jobHolding,
    scaler,
    volumeSweep,
  } = parts;
  // Sandboxes keep running: a restarted server adopts them as they are.
  late.holder?.close();
  codeCopies?.close();
  imagesAhead?.close();
  await buildsAhead?.close();
  await schedules.stop();
  await faults.stop();
  await replicaHolding?.stop();
  await jobHolding?.stop();
  volumeSweep?.();
  if (replicaHolding) scaler.stop();
  await sandboxControllers.stop();
  await leadership.close();
  // Its count of the other nodes stops before their table's connections close.
  quotas.close();
  await late.quotaLeases?.close();
  await late.nodes?.close();
  await gateway.close();
  await builds.stop();
  await app.close();
  await driver.close();
  tokens.close();
  await outbound.close();
  placements?.close();
  volumeNodes?.close();
  parts.replicaPlacements?.close();
  await store.close();
  logger.flush?.();
}
