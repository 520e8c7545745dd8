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
  /**
   * IPv4 ranges sandboxes may reach although private (RFC 1918, CGNAT, link-local...), which they may not by
   * default: BERTH_SANDBOX_ALLOW_CIDRS, comma-separated (e.g. `192.168.1.0/24,10.0.5.7/32`).
   */
  sandboxAllowCidrs: string[];
  /** Job tasks running at once on this server, all executions together (BERTH_JOB_MAX_TASKS). */
  jobMaxTasks?: number;
  /** Private IPv4 ranges job callbacks may be sent to (BERTH_CALLBACK_ALLOW_CIDRS); closed by default. */
  callbackAllowCidrs: string[];
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
    sandboxAllowCidrs: parseCidrList(env.BERTH_SANDBOX_ALLOW_CIDRS ?? ''),
    jobMaxTasks: env.BERTH_JOB_MAX_TASKS ? Number(env.BERTH_JOB_MAX_TASKS) : undefined,
    callbackAllowCidrs: parseCidrList(env.BERTH_CALLBACK_ALLOW_CIDRS ?? ''),
  };
}

/**
 * `a.b.c.d/n` entries (a bare address is /32), comma- or space-separated, with host bits cleared so the
 * firewall takes them as written; anything else fails start-up naming the entry.
 */
export function parseCidrList(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((entry) => {
      const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(entry);
      const octets = m ? m.slice(1, 5).map(Number) : [];
      const bits = m?.[5] === undefined ? 32 : Number(m[5]);
      if (!m || octets.some((o) => o > 255) || bits > 32)
        throw new Error(`BERTH_SANDBOX_ALLOW_CIDRS: not an IPv4 CIDR: ${entry}`);
      const addr = octets.reduce((a, o) => a * 256 + o, 0);
      const size = 2 ** (32 - bits);
      const base = addr - (addr % size);
      return `${[24, 16, 8, 0].map((s) => Math.floor(base / 2 ** s) % 256).join('.')}/${bits}`;
    });
}
