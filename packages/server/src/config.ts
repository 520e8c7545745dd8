// One typed configuration, parsed once at start from flags and environment; read nowhere else.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** Regions a spec may name; the first is the default. */
  regions: string[];
  /**
   * Other region names a spec may use, each standing for one of `regions` (BERTH_REGION_ALIASES, `name=region`
   * pairs): by default the service's own names, so code written for it (which passes one) runs unchanged.
   * An object keeps the name it was given.
   */
  regionAliases: Record<string, string>;
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
  /**
   * Seconds an agent's or function's replica may stay idle before it is removed (above minScale): the next
   * request then starts one from zero (BERTH_REPLICA_REMOVE_AFTER; default 300).
   */
  replicaRemoveAfterS?: number;
  /** Sandboxes started ahead of demand, so a create is an assignment (a few ms) instead of a start. */
  warmPoolSize: number;
  /** Longest wait for a model provider's answer (and between its streamed chunks), in ms. */
  modelTimeoutMs?: number;
  /** Output tokens a token budget reserves for a model call that sets no max_tokens. */
  modelOutputEstimate?: number;
  /**
   * IPv4 ranges sandboxes may reach although private (RFC 1918, CGNAT, link-local...), which they may not by
   * default: BERTH_SANDBOX_ALLOW_CIDRS, comma-separated (e.g. `192.168.1.0/24,10.0.5.7/32`).
   */
  sandboxAllowCidrs: string[];
  /** Total MB of volumes on this server (BERTH_VOLUME_CAPACITY_MB); unset: bounded by the disk only. */
  volumeCapacityMb?: number;
  /** Total MB of volumes per workspace (BERTH_WORKSPACE_VOLUME_CAPACITY_MB); unset: no per-workspace bound. */
  workspaceVolumeCapacityMb?: number;
  /**
   * spec.repository may name a local path, a file:// URL or a loopback/private host (refused by default: a clone
   * would read the server's disk or its LAN): BERTH_GIT_ALLOW_LOCAL=true, for a single-user server (and tests).
   */
  gitAllowLocal?: boolean;
  /** Registries reached over plain HTTP although not loopback (BERTH_INSECURE_REGISTRIES, comma-separated). */
  insecureRegistries: string[];
  /** Pull-through mirrors (BERTH_REGISTRY_MIRRORS: `docker.io=mirror.lan:5000,...`). */
  registryMirrors: Record<string, string>;
  /** JSON file `{"<registry>": {"username": …, "password": …}}`, mode 0600 (BERTH_REGISTRY_AUTH_FILE). */
  registryAuthFile?: string;
  /** Uncompressed bytes one image layer may expand to (BERTH_IMAGE_MAX_LAYER_BYTES). */
  imageMaxLayerBytes?: number;
  /**
   * DNS servers (`a.b.c.d` or `a.b.c.d:port`) the egress proxy and Berth's DNS ask for the names a sandbox's
   * egress policy allows: BERTH_EGRESS_RESOLVERS, comma-separated. Default: the host's resolver (/etc/hosts too).
   */
  egressResolvers?: string[];
  /**
   * Egress gateways: which host-local addresses may be handed out to sandboxes as their egress address.
   * BERTH_EGRESS_GATEWAYS, `name=addr,addr;name2=addr` (e.g. `office=198.51.100.5,198.51.100.6`).
   */
  egressGateways?: Record<string, string[]>;
  /** Job tasks running at once on this server, all executions together (BERTH_JOB_MAX_TASKS). */
  jobMaxTasks?: number;
  /**
   * Private or reserved ranges agents' and jobs' callbacks may be sent to (BERTH_CALLBACK_ALLOW_CIDRS, IPv4 CIDRs);
   * closed by default (SSRF). The older BERTH_CALLBACK_ALLOW_PRIVATE=true opens every range.
   */
  callbackAllowCidrs: string[];
  /**
   * Seconds a request to an agent or function may pass with no byte either way (BERTH_REQUEST_IDLE_TIMEOUT;
   * default 100, gateway/request-deadlines.ts). Tests shorten it.
   */
  requestIdleTimeoutS?: number;
  /**
   * The bearer token that reads every series of /metrics, every workspace's included (BERTH_METRICS_TOKEN; at
   * least METRICS_TOKEN_MIN_LENGTH characters): the operator's Prometheus. Without it, a scrape sees the series of
   * the workspaces its credential is a member of, or none without one (api/metrics-access.ts).
   */
  metricsToken?: string;
}

/** A shorter operator token could be guessed: 16 characters of a random token is already 80+ bits. */
export const METRICS_TOKEN_MIN_LENGTH = 16;

/** What BERTH_CALLBACK_ALLOW_PRIVATE=true (kept as an alias) stands for: every IPv4 and IPv6 range opened. */
export const ALLOW_EVERY_RANGE = ['0.0.0.0/0', '::/0'];

/** The service's region names its SDK and users' code pass (the SDK's own messages name these). */
export const SERVICE_REGIONS = ['us-pdx-1', 'us-was-1', 'eu-lon-1', 'eu-dub-1'];

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
  const regions = (env.BERTH_REGIONS ?? 'local')
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  const standby = Number(pick('standbyAfter', 'BERTH_STANDBY_AFTER') ?? 15);
  if (!(standby > 0)) throw new Error('standby-after must be a positive number of seconds');
  return {
    host: pick('host', 'BERTH_HOST') ?? '127.0.0.1',
    port,
    dataDir: resolve(pick('dataDir', 'BERTH_DATA_DIR') ?? join(homedir(), '.berth')),
    regions,
    regionAliases: parseRegionAliases(env.BERTH_REGION_ALIASES, regions),
    inferenceHost: env.BERTH_INFERENCE_HOST || undefined,
    publicUrl: env.BERTH_PUBLIC_URL || undefined,
    bodyLimit: Number(env.BERTH_BODY_LIMIT ?? DEFAULT_BODY_LIMIT),
    masterKey: env.BERTH_MASTER_KEY || undefined,
    logLevel: env.BERTH_LOG_LEVEL ?? 'info',
    standbyAfterS: standby,
    replicaRemoveAfterS: env.BERTH_REPLICA_REMOVE_AFTER
      ? positiveInt(env.BERTH_REPLICA_REMOVE_AFTER, 'BERTH_REPLICA_REMOVE_AFTER')
      : undefined,
    warmPoolSize: Number(env.BERTH_WARM_POOL ?? DEFAULT_WARM_POOL),
    modelTimeoutMs: env.BERTH_MODEL_TIMEOUT_MS ? Number(env.BERTH_MODEL_TIMEOUT_MS) : undefined,
    modelOutputEstimate: env.BERTH_MODEL_OUTPUT_ESTIMATE
      ? positiveInt(env.BERTH_MODEL_OUTPUT_ESTIMATE, 'BERTH_MODEL_OUTPUT_ESTIMATE')
      : undefined,
    sandboxAllowCidrs: parseCidrList(env.BERTH_SANDBOX_ALLOW_CIDRS ?? ''),
    volumeCapacityMb: positiveMb(env.BERTH_VOLUME_CAPACITY_MB, 'BERTH_VOLUME_CAPACITY_MB'),
    workspaceVolumeCapacityMb: positiveMb(
      env.BERTH_WORKSPACE_VOLUME_CAPACITY_MB,
      'BERTH_WORKSPACE_VOLUME_CAPACITY_MB',
    ),
    gitAllowLocal: env.BERTH_GIT_ALLOW_LOCAL === 'true',
    insecureRegistries: (env.BERTH_INSECURE_REGISTRIES ?? '').split(/[\s,]+/).filter(Boolean),
    registryMirrors: Object.fromEntries(
      (env.BERTH_REGISTRY_MIRRORS ?? '')
        .split(/[\s,]+/)
        .filter(Boolean)
        .map((kv) => {
          const [from, to] = kv.split('=');
          if (!from || !to) throw new Error(`BERTH_REGISTRY_MIRRORS entry ${kv} is not registry=mirror`);
          return [from, to];
        }),
    ),
    registryAuthFile: env.BERTH_REGISTRY_AUTH_FILE || undefined,
    imageMaxLayerBytes: env.BERTH_IMAGE_MAX_LAYER_BYTES ? Number(env.BERTH_IMAGE_MAX_LAYER_BYTES) : undefined,
    egressResolvers: parseResolvers(env.BERTH_EGRESS_RESOLVERS ?? ''),
    egressGateways: parseGateways(env.BERTH_EGRESS_GATEWAYS ?? ''),
    jobMaxTasks: env.BERTH_JOB_MAX_TASKS ? Number(env.BERTH_JOB_MAX_TASKS) : undefined,
    callbackAllowCidrs: [
      ...parseCidrList(env.BERTH_CALLBACK_ALLOW_CIDRS ?? ''),
      ...(env.BERTH_CALLBACK_ALLOW_PRIVATE === 'true' ? ALLOW_EVERY_RANGE : []),
    ],
    requestIdleTimeoutS: positiveSeconds(env.BERTH_REQUEST_IDLE_TIMEOUT, 'BERTH_REQUEST_IDLE_TIMEOUT'),
    metricsToken: metricsToken(env.BERTH_METRICS_TOKEN),
  };
}

function positiveSeconds(v: string | undefined, name: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!(n > 0)) throw new Error(`${name} must be a positive number of seconds, got ${v}`);
  return n;
}

function positiveInt(v: string, name: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, not ${v}`);
  return n;
}

function positiveMb(v: string | undefined, name: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!(Number.isInteger(n) && n > 0)) throw new Error(`${name} must be a positive number of MB, got ${v}`);
  return n;
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

/**
 * `name=region` pairs (comma- or space-separated) whose region must be one served; unset = the service's names
 * (SERVICE_REGIONS) standing for the first region, empty = none. A served region's own name is never an alias.
 */
export function parseRegionAliases(text: string | undefined, regions: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (text === undefined) {
    for (const n of SERVICE_REGIONS) if (!regions.includes(n)) out[n] = regions[0];
    return out;
  }
  for (const entry of text.split(/[\s,]+/).filter(Boolean)) {
    const [name, target, extra] = entry.split('=');
    if (!name || !target || extra !== undefined)
      throw new Error(`BERTH_REGION_ALIASES: expected name=region, got ${entry}`);
    if (!regions.includes(target))
      throw new Error(
        `BERTH_REGION_ALIASES: ${entry} names region ${target}, which BERTH_REGIONS does not serve`,
      );
    if (!regions.includes(name)) out[name] = target;
  }
  return out;
}

/** Every region name a spec may use: the served regions (the first is the default), then their aliases. */
export const regionNames = (c: Pick<Config, 'regions' | 'regionAliases'>) => [
  ...c.regions,
  ...Object.keys(c.regionAliases),
];

/** `a.b.c.d` or `a.b.c.d:port` entries, comma- or space-separated; undefined when none (the host's resolver). */
function parseResolvers(text: string): string[] | undefined {
  const out = text.split(/[\s,]+/).filter(Boolean);
  for (const entry of out)
    if (!/^\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?$/.test(entry))
      throw new Error(`BERTH_EGRESS_RESOLVERS: not an IPv4 address[:port]: ${entry}`);
  return out.length ? out : undefined;
}

/** `name=addr,addr;name2=addr`; names as the API's (lowercase, digits, hyphens), addresses IPv4. */
function parseGateways(text: string): Record<string, string[]> | undefined {
  const out: Record<string, string[]> = {};
  for (const entry of text
    .split(';')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const [name, list = ''] = entry.split('=');
    const addresses = list
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean);
    if (!/^[a-z0-9][a-z0-9-]{0,48}$/.test(name.trim()) || !addresses.length)
      throw new Error(`BERTH_EGRESS_GATEWAYS: expected name=addr[,addr...]: ${entry}`);
    for (const a of addresses)
      if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(a))
        throw new Error(`BERTH_EGRESS_GATEWAYS: not an IPv4 address: ${a}`);
    out[name.trim()] = addresses;
  }
  return Object.keys(out).length ? out : undefined;
}

function metricsToken(raw: string | undefined): string | undefined {
  const t = raw?.trim();
  if (!t) return undefined;
  if (t.length < METRICS_TOKEN_MIN_LENGTH || /\s/.test(t))
    throw new Error(
      `BERTH_METRICS_TOKEN must be at least ${METRICS_TOKEN_MIN_LENGTH} characters without spaces (e.g. openssl rand -hex 24)`,
    );
  return t;
}
