// One typed configuration, parsed once at start from flags and environment; read nowhere else.
import { homedir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import ipaddr from 'ipaddr.js';

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /**
   * The database every server of a cluster shares (`--database`, BERTH_DATABASE_URL): a `postgres://` URL
   * (docs/cluster.md). Unset: the SQLite file `<dataDir>/berth.db`, this server's alone.
   */
  databaseUrl?: string;
  /** This server's id among the cluster's nodes (BERTH_NODE_ID); else one made once per data dir. */
  nodeId?: string;
  /** Where the cluster's other servers reach this one (BERTH_PEER_URL); else the public URL or host:port. */
  peerUrl?: string;
  /** Seconds a node's lease lasts without a heartbeat before it is reported unhealthy (BERTH_NODE_LEASE_S; 10). */
  nodeLeaseS?: number;
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
   * Seconds between two looks at running sandboxes for faults they survive (a process ended for lack of memory, a
   * full disk), said as events (BERTH_FAULT_CHECK_EVERY; default 5).
   */
  faultCheckS?: number;
  /**
   * Seconds an agent's or function's replica may stay idle before it is removed (above minScale): the next
   * request then starts one from zero (BERTH_REPLICA_REMOVE_AFTER; default 300).
   */
  replicaRemoveAfterS?: number;
  /**
   * Seconds the last replica of an agent or function stays frozen (standby, then deep standby) after it would have
   * been removed at scale to zero, so the next request wakes it instead of starting one (BERTH_REPLICA_RETENTION;
   * default 14400, 0 removes it at once as before; decision 090).
   */
  replicaRetentionS: number;
  /**
   * Seconds between a cluster leader's checks of its lock session (BERTH_LEADER_CHECK_EVERY; default 1). A leader
   * cut from that session stops sooner at its first write, which the database refuses (decision 068).
   */
  leaderCheckS?: number;
  /**
   * Whether a cluster's followers build ahead what the leader built (BERTH_BUILDS_AHEAD, default true; `false` saves
   * their CPU, and a new leader then builds before it starts replicas: decision 067).
   */
  buildsAhead: boolean;
  /**
   * Whether each server of a cluster copies every workspace image it lacks from the others (BERTH_IMAGES_AHEAD,
   * default true; `false`: a node copies an image when a sandbox on it starts there, and an image acknowledged by the
   * leader is held by the leader alone until then: decision 087).
   */
  imagesAhead: boolean;
  /**
   * Whether a server of a cluster copies a built app it lacks from a node holding it rather than building it
   * (BERTH_APP_COPIES, default true; `false`: it builds every app it runs itself, as before decision 094). Its own
   * apps are given to the other nodes either way.
   */
  appCopies: boolean;
  /**
   * Seconds an image write (import, pull, build) on a cluster's leader waits for another node to hold the image
   * before it is answered (BERTH_IMAGE_COPY_WAIT_S, default 30; 0: answered at once, the copy follows within about a
   * second and the copy's time: decision 087).
   */
  imageCopyWaitS: number;
  /** Sandboxes started ahead of demand, so a create is an assignment (a few ms) instead of a start. */
  warmPoolSize: number;
  /** The most the warm pool grows to while creates come fast (BERTH_WARM_POOL_MAX; the base on top of demand). */
  warmPoolMax: number;
  /**
   * Seconds in standby before a sandbox's memory is pushed out to swap (BERTH_DEEP_STANDBY_AFTER; default 300,
   * 0 disables; decision 058).
   */
  deepStandbyAfterS: number;
  /**
   * Whether a deep sandbox's API daemon stays resident (BERTH_DEEP_STANDBY_DAEMON `resident`: a quicker wake for
   * ~10 MiB more per sandbox) or goes to swap with the rest (`swap`, the default; decision 058).
   */
  deepStandbyDaemon: 'resident' | 'swap';
  /** MB of the swap file Berth makes under the data dir for deep standby when the host has no swap (BERTH_SWAP_MB;
   *  default 0: only the host's own swap is used, and a host without swap has deep standby off, said at start). */
  swapMb: number;
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
   * spec.repository may name a local path or a file:// URL (refused by default: a clone would read the server's
   * disk): BERTH_GIT_ALLOW_LOCAL=true, for a single-user server (and tests). Hosts follow outboundAllowCidrs.
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
   * MB of unpacked images one workspace may hold (BERTH_QUOTA_IMAGE_MB); unset: the image store's default
   * (runtime/images/image-store.ts DEFAULT_IMAGE_QUOTA_BYTES, 10240 MB).
   */
  imageQuotaMb?: number;
  /**
   * MB of snapshot layers one workspace may hold (BERTH_QUOTA_SNAPSHOT_MB); unset: 20480 MB
   * (controllers/sandbox/snapshots.ts DEFAULT_SNAPSHOT_QUOTA_BYTES).
   */
  snapshotQuotaMb?: number;
  /**
   * Layers a snapshot's stack may have before a capture squashes it into one (BERTH_SNAPSHOT_MAX_LAYERS, 2 to 128);
   * unset: 128 (runtime/snapshot-layers.ts MAX_SNAPSHOT_DEPTH).
   */
  snapshotMaxLayers?: number;
  /**
   * DNS servers (`a.b.c.d` or `a.b.c.d:port`) the egress proxy and Berth's DNS ask for the names a sandbox's
   * egress policy allows: BERTH_EGRESS_RESOLVERS, comma-separated. Default: the host's resolver (/etc/hosts too).
   */
  egressResolvers?: string[];
  /**
   * DNS servers (`a.b.c.d` or `a.b.c.d:port`) a custom domain's TXT challenge is read from (decision 055):
   * BERTH_DOMAIN_RESOLVERS, comma-separated. Default: the host's resolver.
   */
  domainResolvers?: string[];
  /**
   * Egress gateways: which host-local addresses may be handed out to sandboxes as their egress address.
   * BERTH_EGRESS_GATEWAYS, `name=addr,addr;name2=addr` (e.g. `office=198.51.100.5,198.51.100.6`).
   */
  egressGateways?: Record<string, string[]>;
  /** Job tasks running at once on this server, all executions together (BERTH_JOB_MAX_TASKS). */
  jobMaxTasks?: number;
  /**
   * Days an ended job execution is kept, with its tasks and their logs (BERTH_JOB_EXECUTION_RETENTION_DAYS, default
   * DEFAULT_EXECUTION_RETENTION_DAYS; 0 keeps them for ever).
   */
  jobExecutionRetentionDays: number;
  /** What one workspace may hold or run at once (BERTH_QUOTA_*; docs/decisions/040-workspace-quotas.md). */
  quotas: QuotaLimits;
  /**
   * Reserved ranges (IPv4 and IPv6 CIDRs) that the requests Berth makes for users (callbacks, git clones, model
   * providers, image registries) may reach: BERTH_OUTBOUND_ALLOW_CIDRS. Closed by default (SSRF). The older
   * BERTH_CALLBACK_ALLOW_CIDRS adds to it, BERTH_CALLBACK_ALLOW_PRIVATE=true stands for every range. Loopback opens
   * only when a range inside it is listed (127.0.0.0/8, ::1); the host's other addresses never (outbound/).
   */
  outboundAllowCidrs: string[];
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

/**
 * What BERTH_CALLBACK_ALLOW_PRIVATE=true (kept as an alias) stands for: every IPv4 and IPv6 range opened — which
 * does not open loopback or the host's own addresses (they open only when listed themselves).
 */
export const ALLOW_EVERY_RANGE = ['0.0.0.0/0', '::/0'];

/**
 * The quotas every workspace has (the same for all: per-workspace overrides are a later issue, decision 040).
 * Counted from what the workspace's objects ask for and what runs for it (controllers/core/quotas.ts).
 */
export interface QuotaLimits {
  /** MB of memory: its sandboxes' `runtime.memory` (until TERMINATED) plus its running replicas, builds and tasks. */
  memoryMb: number;
  /** Sandbox objects, until TERMINATED. */
  sandboxes: number;
  /** Agent and function replicas running or starting. */
  replicas: number;
  /** Builds running (each a 2 GiB build sandbox). */
  builds: number;
  /** Job tasks running, all the workspace's executions together. */
  jobTasks: number;
}

/** The environment variable that sets each quota (named in every refusal, so the reader knows what to ask for). */
export const QUOTA_SETTINGS: Record<keyof QuotaLimits, string> = {
  memoryMb: 'BERTH_QUOTA_MEMORY_MB',
  sandboxes: 'BERTH_QUOTA_SANDBOXES',
  replicas: 'BERTH_QUOTA_REPLICAS',
  builds: 'BERTH_QUOTA_BUILDS',
  jobTasks: 'BERTH_QUOTA_JOB_TASKS',
};

/** Days an ended job execution is kept by default (BERTH_JOB_EXECUTION_RETENTION_DAYS): a month of history. */
export const DEFAULT_EXECUTION_RETENTION_DAYS = 30;

/** Tasks running at once on the server, all workspaces together (BERTH_JOB_MAX_TASKS): each is a sandbox. */
export const DEFAULT_JOB_MAX_TASKS = 50;

/**
 * The default quotas (decision 040 says why each): three quarters of the host's memory, so one workspace can never
 * promise itself the whole host and a quarter stays for the server and everyone else; 100 sandboxes and 50
 * replicas, bounds on the kernel objects (a slot, a network namespace, cgroups, a uid) each holds whatever its
 * memory; 2 builds, as each is 2 GiB and CPU-bound; half the server's task pool, so no workspace holds all of it.
 */
export function defaultQuotas(hostMemoryMb: number, jobMaxTasks = DEFAULT_JOB_MAX_TASKS): QuotaLimits {
  return {
    memoryMb: Math.floor((hostMemoryMb * 3) / 4),
    sandboxes: 100,
    replicas: 50,
    builds: 2,
    jobTasks: Math.max(1, Math.ceil(jobMaxTasks / 2)),
  };
}

/** The service's region names its SDK and users' code pass (the SDK's own messages name these). */
export const SERVICE_REGIONS = ['us-pdx-1', 'us-was-1', 'eu-lon-1', 'eu-dub-1'];

/** 1 MiB: management bodies are small; uploads go through the sandbox API, not /v0. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** Two warm sandboxes cover a burst of creates on a laptop while the pool refills; each costs ~12 MB idle. */
export const DEFAULT_WARM_POOL = 2;
/**
 * Room for a burst of 20 creates (the measure) and a few more: the pool holds DEFAULT_WARM_POOL more than the
 * last minute's creates (pool-demand.ts), and 24 ready sandboxes hold ~200-290 MB while the demand lasts; the pool is
 * back to DEFAULT_WARM_POOL a minute after the last create.
 */
export const DEFAULT_WARM_POOL_MAX = 24;
/** Five minutes: past it a sandbox is likely idle for long (its owner left); a wake then pays for its page-ins. */
export const DEFAULT_DEEP_STANDBY_AFTER_S = 300;
/**
 * Four hours: a scaled-to-zero replica kept frozen costs ~2 MiB of host memory once in deep standby (its pages in
 * swap; all its memory where the host has no swap) and gives its quota slot up on demand, so it may outlast the
 * pauses of a working day (a meeting, lunch) and still be gone overnight (decision 090).
 */
export const DEFAULT_REPLICA_RETENTION_S = 4 * 3600;
/** Swap is host-wide and takes disk: Berth makes a swap file only when asked to (decision 058). */
export const DEFAULT_SWAP_MB = 0;

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
    databaseUrl: databaseUrl(pick('database', 'BERTH_DATABASE_URL')),
    nodeId: env.BERTH_NODE_ID || undefined,
    peerUrl: env.BERTH_PEER_URL || undefined,
    nodeLeaseS: positiveSeconds(env.BERTH_NODE_LEASE_S, 'BERTH_NODE_LEASE_S'),
    regions,
    regionAliases: parseRegionAliases(env.BERTH_REGION_ALIASES, regions),
    inferenceHost: env.BERTH_INFERENCE_HOST || undefined,
    publicUrl: env.BERTH_PUBLIC_URL || undefined,
    bodyLimit: Number(env.BERTH_BODY_LIMIT ?? DEFAULT_BODY_LIMIT),
    masterKey: env.BERTH_MASTER_KEY || undefined,
    logLevel: env.BERTH_LOG_LEVEL ?? 'info',
    standbyAfterS: standby,
    faultCheckS: positiveSeconds(env.BERTH_FAULT_CHECK_EVERY, 'BERTH_FAULT_CHECK_EVERY'),
    leaderCheckS: positiveSeconds(env.BERTH_LEADER_CHECK_EVERY, 'BERTH_LEADER_CHECK_EVERY'),
    buildsAhead: onOff(env.BERTH_BUILDS_AHEAD, 'BERTH_BUILDS_AHEAD', true),
    imagesAhead: onOff(env.BERTH_IMAGES_AHEAD, 'BERTH_IMAGES_AHEAD', true),
    appCopies: onOff(env.BERTH_APP_COPIES, 'BERTH_APP_COPIES', true),
    imageCopyWaitS: nonNegativeInt(env.BERTH_IMAGE_COPY_WAIT_S ?? '30', 'BERTH_IMAGE_COPY_WAIT_S'),
    replicaRemoveAfterS: env.BERTH_REPLICA_REMOVE_AFTER
      ? positiveInt(env.BERTH_REPLICA_REMOVE_AFTER, 'BERTH_REPLICA_REMOVE_AFTER')
      : undefined,
    replicaRetentionS: nonNegativeInt(
      env.BERTH_REPLICA_RETENTION ?? String(DEFAULT_REPLICA_RETENTION_S),
      'BERTH_REPLICA_RETENTION',
    ),
    warmPoolSize: Number(env.BERTH_WARM_POOL ?? DEFAULT_WARM_POOL),
    warmPoolMax: nonNegativeInt(
      env.BERTH_WARM_POOL_MAX ?? String(DEFAULT_WARM_POOL_MAX),
      'BERTH_WARM_POOL_MAX',
    ),
    deepStandbyAfterS: nonNegativeInt(
      env.BERTH_DEEP_STANDBY_AFTER ?? String(DEFAULT_DEEP_STANDBY_AFTER_S),
      'BERTH_DEEP_STANDBY_AFTER',
    ),
    deepStandbyDaemon: deepStandbyDaemon(env.BERTH_DEEP_STANDBY_DAEMON),
    swapMb: nonNegativeInt(env.BERTH_SWAP_MB ?? String(DEFAULT_SWAP_MB), 'BERTH_SWAP_MB'),
    modelTimeoutMs: env.BERTH_MODEL_TIMEOUT_MS ? Number(env.BERTH_MODEL_TIMEOUT_MS) : undefined,
    modelOutputEstimate: env.BERTH_MODEL_OUTPUT_ESTIMATE
      ? positiveInt(env.BERTH_MODEL_OUTPUT_ESTIMATE, 'BERTH_MODEL_OUTPUT_ESTIMATE')
      : undefined,
    sandboxAllowCidrs: parseCidrList(env.BERTH_SANDBOX_ALLOW_CIDRS ?? '', 'BERTH_SANDBOX_ALLOW_CIDRS'),
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
    imageQuotaMb: positiveMb(env.BERTH_QUOTA_IMAGE_MB, 'BERTH_QUOTA_IMAGE_MB'),
    snapshotQuotaMb: positiveMb(env.BERTH_QUOTA_SNAPSHOT_MB, 'BERTH_QUOTA_SNAPSHOT_MB'),
    snapshotMaxLayers: snapshotMaxLayers(env.BERTH_SNAPSHOT_MAX_LAYERS),
    egressResolvers: parseResolvers(env.BERTH_EGRESS_RESOLVERS ?? ''),
    domainResolvers: parseResolvers(env.BERTH_DOMAIN_RESOLVERS ?? '', 'BERTH_DOMAIN_RESOLVERS'),
    egressGateways: parseGateways(env.BERTH_EGRESS_GATEWAYS ?? ''),
    jobMaxTasks: env.BERTH_JOB_MAX_TASKS ? Number(env.BERTH_JOB_MAX_TASKS) : undefined,
    jobExecutionRetentionDays: env.BERTH_JOB_EXECUTION_RETENTION_DAYS
      ? nonNegativeInt(env.BERTH_JOB_EXECUTION_RETENTION_DAYS, 'BERTH_JOB_EXECUTION_RETENTION_DAYS')
      : DEFAULT_EXECUTION_RETENTION_DAYS,
    quotas: parseQuotas(env),
    outboundAllowCidrs: [
      ...parseCidrList(env.BERTH_OUTBOUND_ALLOW_CIDRS ?? '', 'BERTH_OUTBOUND_ALLOW_CIDRS', true),
      ...parseCidrList(env.BERTH_CALLBACK_ALLOW_CIDRS ?? '', 'BERTH_CALLBACK_ALLOW_CIDRS', true),
      ...(env.BERTH_CALLBACK_ALLOW_PRIVATE === 'true' ? ALLOW_EVERY_RANGE : []),
    ],
    requestIdleTimeoutS: positiveSeconds(env.BERTH_REQUEST_IDLE_TIMEOUT, 'BERTH_REQUEST_IDLE_TIMEOUT'),
    metricsToken: metricsToken(env.BERTH_METRICS_TOKEN),
  };
}

/** Each quota from its BERTH_QUOTA_* setting (a positive integer), else its default for this host. */
function parseQuotas(env: NodeJS.ProcessEnv): QuotaLimits {
  const pool = env.BERTH_JOB_MAX_TASKS ? Number(env.BERTH_JOB_MAX_TASKS) : undefined;
  const out = defaultQuotas(Math.floor(totalmem() / 2 ** 20), pool);
  for (const [k, name] of Object.entries(QUOTA_SETTINGS) as [keyof QuotaLimits, string][]) {
    const v = env[name];
    if (v !== undefined && v !== '') out[k] = positiveInt(v, name);
  }
  return out;
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

function deepStandbyDaemon(v: string | undefined): 'resident' | 'swap' {
  if (v === undefined || v === '' || v === 'swap') return 'swap';
  if (v === 'resident') return 'resident';
  throw new Error(`BERTH_DEEP_STANDBY_DAEMON must be resident or swap, not ${JSON.stringify(v)}`);
}

function nonNegativeInt(v: string, name: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be a whole number, 0 or more, not ${JSON.stringify(v)}`);
  return n;
}

function snapshotMaxLayers(v: string | undefined): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = positiveInt(v, 'BERTH_SNAPSHOT_MAX_LAYERS');
  if (n < 2 || n > 128) throw new Error(`BERTH_SNAPSHOT_MAX_LAYERS must be from 2 to 128, not ${v}`);
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
 * firewall takes them as written; with `v6`, IPv6 CIDRs too (a bare address is /128). Anything else fails
 * start-up naming the setting and the entry.
 */
export function parseCidrList(text: string, setting = 'BERTH_SANDBOX_ALLOW_CIDRS', v6 = false): string[] {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((entry) => {
      if (v6 && entry.includes(':')) return ipv6Cidr(entry, setting);
      const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(entry);
      const octets = m ? m.slice(1, 5).map(Number) : [];
      const bits = m?.[5] === undefined ? 32 : Number(m[5]);
      if (!m || octets.some((o) => o > 255) || bits > 32)
        throw new Error(`${setting}: not an IPv4${v6 ? ' or IPv6' : ''} CIDR: ${entry}`);
      const addr = octets.reduce((a, o) => a * 256 + o, 0);
      const size = 2 ** (32 - bits);
      const base = addr - (addr % size);
      return `${[24, 16, 8, 0].map((s) => Math.floor(base / 2 ** s) % 256).join('.')}/${bits}`;
    });
}

function ipv6Cidr(entry: string, setting: string): string {
  const [addr, bits = '128', extra] = entry.split('/');
  if (extra === undefined && /^\d{1,3}$/.test(bits) && Number(bits) <= 128 && ipaddr.IPv6.isValid(addr)) {
    const cidr = `${addr}/${Number(bits)}`;
    return `${ipaddr.IPv6.networkAddressFromCIDR(cidr).toString()}/${Number(bits)}`;
  }
  throw new Error(`${setting}: not an IPv4 or IPv6 CIDR: ${entry}`);
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
function parseResolvers(text: string, setting = 'BERTH_EGRESS_RESOLVERS'): string[] | undefined {
  const out = text.split(/[\s,]+/).filter(Boolean);
  for (const entry of out)
    if (!/^\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?$/.test(entry))
      throw new Error(`${setting}: not an IPv4 address[:port]: ${entry}`);
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

function databaseUrl(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  if (!/^postgres(ql)?:\/\//.test(raw))
    throw new Error(
      'the database must be a PostgreSQL URL (postgres://user:password@host:5432/db); leave it unset for the built-in SQLite file',
    );
  return raw;
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

/** A `true`/`false` setting (also `1`/`0`); unset: `fallback`. Anything else is refused, naming the setting. */
function onOff(text: string | undefined, name: string, fallback: boolean): boolean {
  if (text === undefined || text === '') return fallback;
  if (text === 'true' || text === '1') return true;
  if (text === 'false' || text === '0') return false;
  throw new Error(`${name} must be true or false, not ${JSON.stringify(text)}`);
}
