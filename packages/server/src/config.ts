// One typed configuration, parsed once at start from flags and environment; read nowhere else.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** Regions a spec may name; the first is the default. */
  regions: string[];
  /** Domain with wildcard DNS for `sbx-<name>-<ws>.<region>.<host>` addresses, if any. */
  inferenceHost?: string;
  /** Public base URL of this server, used in `metadata.url`; derived from host/port when absent. */
  publicUrl?: string;
  /** Largest request body, in bytes. */
  bodyLimit: number;
  /** Master key (base64 or hex, 32 bytes) for secrets at rest; else `<dataDir>/master.key`. */
  masterKey?: string;
  logLevel: string;
  /** Seconds of no request before a sandbox goes to standby. */
  standbyAfterS: number;
  /** Sandboxes started ahead of demand, so a create is an assignment (a few ms) instead of a start. */
  warmPoolSize: number;
  /** Longest wait for a model provider's answer (and between its streamed chunks), in ms. */
  modelTimeoutMs?: number;
}

/** 1 MiB: management bodies are small; uploads go through the sandbox API, not /v0. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** Two warm sandboxes cover a burst of creates on a laptop while the pool refills; each costs ~12 MB idle. */
export const DEFAULT_WARM_POOL = 2;

export function loadConfig(
  flags: Partial<Record<string, string | undefined>>,
  env: NodeJS.ProcessEnv,
): Config {
  const pick = (flag: string, envName: string) => flags[flag] ?? env[envName];
  const port = Number(pick('port', 'BERTH_PORT') ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`invalid port: ${pick('port', 'BERTH_PORT')}`);
  const standby = Number(pick('standbyAfter', 'BERTH_STANDBY_AFTER') ?? 15);
  if (!(standby > 0)) throw new Error('standby-after must be a positive number of seconds');
  return {
    host: pick('host', 'BERTH_HOST') ?? '127.0.0.1',
    port,
    dataDir: resolve(pick('dataDir', 'BERTH_DATA_DIR') ?? join(homedir(), '.berth')),
    regions: (env.BERTH_REGIONS ?? 'local')
      .split(',')
      .map((r) => r.trim())
      .filter(Boolean),
    inferenceHost: env.BERTH_INFERENCE_HOST || undefined,
    publicUrl: env.BERTH_PUBLIC_URL || undefined,
    bodyLimit: Number(env.BERTH_BODY_LIMIT ?? DEFAULT_BODY_LIMIT),
    masterKey: env.BERTH_MASTER_KEY || undefined,
    logLevel: env.BERTH_LOG_LEVEL ?? 'info',
    standbyAfterS: standby,
    warmPoolSize: Number(env.BERTH_WARM_POOL ?? DEFAULT_WARM_POOL),
    modelTimeoutMs: env.BERTH_MODEL_TIMEOUT_MS ? Number(env.BERTH_MODEL_TIMEOUT_MS) : undefined,
  };
}
