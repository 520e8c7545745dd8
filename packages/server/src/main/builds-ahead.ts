// In a cluster, each server that does not lead the controllers builds ahead what the leader built, so that it can
// take the lead without building (controllers/code/builds-ahead.ts, docs/decisions/067-builds-ahead.md); the builds
// it made and those that failed are counted in /metrics. On SQLite the one server leads: nothing to build ahead;
// BERTH_BUILDS_AHEAD=false turns it off (the followers' CPU saved, a new leader building first).
import { Counter, type Registry } from 'prom-client';
import type { Config } from '../config.js';
import { BuildsAhead } from '../controllers/code/builds-ahead.js';
import type { Controllers } from './controllers.js';
import type { Core } from './store.js';
import type { Workloads } from './workloads.js';

export async function startBuildsAhead(
  config: Config,
  registry: Registry,
  parts: Core & Workloads & Pick<Controllers, 'leadership'>,
): Promise<BuildsAhead | undefined> {
  if (!config.databaseUrl || !config.buildsAhead) return undefined;
  const { store, logger, builder, code, leadership } = parts;
  const done = new Counter({
    name: 'berth_builds_ahead_total',
    help: 'Apps this server built ahead of taking the lead (built), copied ahead from a node holding them (copied), and such builds or copies that failed here (failed)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  done.labels('built').inc(0);
  done.labels('copied').inc(0);
  done.labels('failed').inc(0);
  const ahead = new BuildsAhead({
    store,
    builder,
    code,
    logger,
    leads: () => leadership.leads().includes('controllers'),
    counted: (outcome) => done.labels(outcome).inc(),
  });
  await ahead.start();
  return ahead;
}
