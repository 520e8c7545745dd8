// The store a server runs on: PostgreSQL when the configuration names a database (a cluster's shared state,
// docs/decisions/056-cluster-postgres.md), else the SQLite file in the data dir.
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { createPrivateFile } from './data-dir.js';
import { PostgresStore } from './postgres.js';
import { SqliteStore } from './sqlite.js';
import type { Store } from './store.js';

export async function openStore(
  config: Pick<Config, 'dataDir' | 'databaseUrl'>,
  logger: Logger,
): Promise<Store> {
  if (config.databaseUrl) {
    const store = await PostgresStore.open(config.databaseUrl, {
      warn: (err, msg) => logger.warn({ err }, msg),
    });
    logger.info({ database: redactedUrl(config.databaseUrl) }, 'store: PostgreSQL');
    return store;
  }
  const file = join(config.dataDir, 'berth.db');
  createPrivateFile(file);
  return new SqliteStore(file);
}

/** The URL without its password, for the log. */
export function redactedUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'postgres://…';
  }
}
