// Composition root: config -> data dir -> store -> auth -> resources -> controllers -> HTTP -> shutdown. Each step
// is a module of main/, named for what it wires; the order of the start is this function's, that of the stop
// main/shutdown.ts's.
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Late, StartOptions } from './main/context.js';
import { startAppCollection } from './main/app-collection.js';
import { startBuildsAhead } from './main/builds-ahead.js';
import { openImagesAhead } from './main/images-ahead.js';
import { startAllControllers } from './main/controllers.js';
import { startDataPlane } from './main/gateway.js';
import { createHttp, registerRoutes } from './main/http.js';
import { collectLeftovers } from './main/leftovers.js';
import { listenAndJoin } from './main/nodes.js';
import { openRuntime } from './main/runtime.js';
import { closeServer } from './main/shutdown.js';
import { openCore } from './main/store.js';
import { startWorkloads } from './main/workloads.js';
import type { Store } from './store/store.js';

export type { StartOptions } from './main/context.js';

export interface RunningServer {
  url: string;
  port: number;
  /** Printed once on first start; undefined afterwards. */
  adminKey?: string;
  /** The server's store, for embedding and tests (the database is held exclusively by this process). */
  store: Store;
  /** Every route the HTTP server registered (method and Fastify URL), for tests that walk the whole surface. */
  routes: readonly { method: string; url: string }[];
  /** The server's logger (redacting): `berth serve` logs through it the error that ends the process. */
  logger: Logger;
  close(): Promise<void>;
}

export async function startServer(config: Config, opts: StartOptions = {}): Promise<RunningServer> {
  const late: Late = { actualPort: config.port, wakeController: () => undefined };
  const core = await openCore(config, opts, late);
  const runtime = await openRuntime(config, core);
  const http = await createHttp(config, core);
  const workloads = startWorkloads(config, { ...core, ...runtime }, late);
  const parts = { ...core, ...runtime, ...http, ...workloads };
  const { clusterHolder, codeCopies, peerImages, metrics } = await registerRoutes(config, late, parts);
  const gateway = await startDataPlane(config, late, clusterHolder, parts);
  await collectLeftovers(config, parts);
  // Before anything starts on an image: names let go of while this server was away go (decision 087).
  const imagesAhead = await openImagesAhead(config, late, metrics, { ...parts, peerImages });
  late.imagesAhead = imagesAhead;
  const controllers = await startAllControllers(config, opts, late, gateway, { ...parts, peerImages });
  const buildsAhead = await startBuildsAhead(config, metrics, { ...parts, ...controllers });
  const appCollection = startAppCollection(parts);
  const bootstrap = await listenAndJoin(config, late, gateway, { ...parts, ...controllers });
  imagesAhead?.start();
  return {
    url: `http://${config.host}:${late.actualPort}`,
    port: late.actualPort,
    adminKey: bootstrap.adminKey,
    store: core.store,
    routes: http.routes,
    logger: core.logger,
    async close() {
      appCollection.close();
      await closeServer(late, gateway, { ...parts, ...controllers, codeCopies, buildsAhead, imagesAhead });
    },
  };
}
