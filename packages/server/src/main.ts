// Composition root: config -> data dir -> store -> auth -> resources -> controllers -> HTTP -> shutdown.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { createApp } from './api/app.js';
import { registerCrud } from './api/crud.js';
import { registerMetrics } from './api/metrics.js';
import { registerOpenApi } from './api/openapi.js';
import { createAuth } from './auth/index.js';
import { loadMasterKey } from './auth/master-key.js';
import { SecretBox } from './auth/secret-box.js';
import type { Config } from './config.js';
import { startControllers } from './controllers/index.js';
import { KINDS } from './kinds/index.js';
import { LOG_REDACT_PATHS } from './log-redact.js';
import { Resources } from './store/resources.js';
import { SqliteStore } from './store/sqlite.js';
import { registerTemplates } from './templates/routes.js';

export interface RunningServer {
  url: string;
  port: number;
  /** Printed once on first start; undefined afterwards. */
  adminKey?: string;
  close(): Promise<void>;
}

export async function startServer(config: Config, opts: { logStream?: NodeJS.WritableStream } = {}): Promise<RunningServer> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const logger = pino(
    { level: config.logLevel, redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } },
    (opts.logStream as pino.DestinationStream | undefined) ?? pino.destination(2),
  );
  const box = new SecretBox(loadMasterKey(config));
  const store = new SqliteStore(join(config.dataDir, 'berth.db'));
  const baseUrl = () => config.publicUrl ?? `http://${config.host}:${actualPort}`;
  let actualPort = config.port;
  const resources = new Resources(store, KINDS, box, { regions: config.regions });
  const auth = await createAuth({ store, dataDir: config.dataDir, box, logger });
  const app = createApp({ bodyLimit: config.bodyLimit, logger, authenticator: auth.authenticator });
  await app.register(async (v0) => {
    registerCrud(v0, KINDS, { resources });
    auth.registerRoutes(v0, { baseUrl });
    registerTemplates(v0);
    registerOpenApi(v0, KINDS);
  }, { prefix: '/v0' });
  auth.registerPublicRoutes(app, { baseUrl });
  registerMetrics(app);
  const controllers = startControllers({ resources, logger });
  await app.listen({ host: config.host, port: config.port });
  const addr = app.server.address();
  actualPort = typeof addr === 'object' && addr ? addr.port : config.port;
  const bootstrap = await auth.bootstrap();
  return {
    url: `http://${config.host}:${actualPort}`,
    port: actualPort,
    adminKey: bootstrap.adminKey,
    async close() {
      await controllers.stop();
      await app.close();
      await store.close();
      logger.flush?.();
    },
  };
}
