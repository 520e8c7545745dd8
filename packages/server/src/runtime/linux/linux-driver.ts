// The local driver: sandboxes as bubblewrap process trees in their own cgroups and network namespace.
// It keeps no state that matters in memory: everything is re-read from state.json, /proc and the
// cgroup tree, so a new instance (after a restart) adopts whatever is still running.
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { join, normalize, resolve } from 'node:path';
import {
  checkSandboxId,
  MIN_PIDS,
  type EgressPolicy,
  type RuntimeCapabilities,
  type RuntimeDriver,
  type SandboxEnd,
  type SandboxInfo,
  type SandboxSpec,
  type SandboxStats,
  SandboxNotFoundError,
  SCRATCH_IMAGE,
  specHash,
  type VolumeRef,
  type DriveMount,
} from '../driver.js';
import { type CgroupHost, detectCgroups, SandboxCgroup } from './cgroup.js';
import {
  DAEMON_LOG,
  type HostContext,
  sandboxEnd,
  sandboxEnv,
  startSandbox,
  teardownSandbox,
  writeEnvFile,
} from './create.js';
import { readTail } from './launch.js';
import { resizeWritableLayer } from './disk.js';
import {
  DAEMON_ENTRY,
  defaultCodeDir,
  EMPTY_DIR,
  ensureRunDirs,
  LAYERS_DIR,
  requireHostTools,
  type SandboxPaths,
  sandboxPaths,
  sandboxRunDir,
  unexposeUnder,
} from './host.js';
import { hostTools, sleep } from './exec.js';
import { egressPortsFor } from './egress-ports.js';
import { EGRESS_ENV_KEYS, EgressControl, type EgressControlOptions, samePolicy } from './egress-control.js';
import { NetPool } from './net-pool.js';
import { setAllowedRanges, setupHostNetwork, setupNamespace, slotNet } from './network.js';
import { isDefaultImage } from '../../kinds/image-reference.js';
import { type ImageRoots, ImageStore, isImageId, type StoredImage } from '../images/image-store.js';
import { ensureBaseEtc, ensureInitLayer, sandboxResolvers } from './rootfs.js';
import { copyChanges } from './changes.js';
import { captureLayer } from './snapshot.js';
import { seccompFilterForHost } from './seccomp.js';
import { slotOwner, transferSlot } from './slots.js';
import { entryAlive, registerServer, serverEntries, unregisterServer } from './servers.js';
import { emptySweepReport, removeUnrecorded, type SweepReport, sweepHost } from './host-sweep.js';
import { isProcessAlive, readRecord, type SandboxRecord, writeRecord, writeRecordAsync } from './state.js';
import { checkSpec } from './spec-check.js';
import {
  checkVolumeDirs,
  ensureVolume,
  volumesOnDisk,
  removeVolume,
  storeAsRoot,
  volumeDir,
  volumeMountPoint,
} from './volumes.js';
import { driveHelper } from './drive-helper.js';
import { attachDrive, attachMounts, detachDrive, drivesIn, namespacePid } from './drive-mount.js';
import { withoutSecrets } from '../egress/policy.js';
import { WarmPool, type WarmSandbox } from './warm-pool.js';
import { DEMAND_WINDOW_MS, PoolDemand } from './pool-demand.js';
import {
  DeepStandby,
  type DeepStandbyEvent,
  prepareSwap,
  type SwapOptions,
  type SwapState,
} from './deep-standby.js';
import { canPageOut } from './page-out.js';

/** Host uids of sandboxes: base + slot. Far above the usual subordinate-uid ranges (100000 + 65536·n). */
export const DEFAULT_UID_BASE = 1_000_000_000;
/** How long after a create the pools start refilling (see refillSoon). */
export const REFILL_DELAY_MS = 250;
/**
 * After a create of a burst, the full refill waits this many REFILL_DELAY_MS without a create: under load the time a
 * client spends between two creates (the answer, its first exec, the next POST's way to the driver) passed 250 ms in
 * the middle of a burst, and four starts then ran beside its rest (decision 084).
 */
export const BURST_PAUSE_FACTOR = 4;

/** Sandboxes kept ready per image in recent use (when the default image's pool is on at all). */
export const IMAGE_POOL_SIZE = 1;
/**
 * The most an image's pool grows to: its base plus the creates on that image in the last minute (as the default
 * image's pool grows, decision 058), so alternating or repeated creates on one image find a sandbox ready.
 */
export const IMAGE_POOL_MAX = 4;
/**
 * Images with a pool at once: the most recently used. Each ready sandbox costs ~12 MB idle, and an image used once
 * an hour is not worth holding one for.
 */
export const MAX_IMAGE_POOLS = 4;

/** An image's pool's key: the head of its id (its directory under `<dataDir>/warm-img`). */
const imagePoolKey = (imageId: string) => imageId.slice('sha256:'.length, 'sha256:'.length + 16);

/** What daemonLog reads by default: the last lines a person looks at when a daemon has ended. */
export const DAEMON_LOG_TAIL_BYTES = 4096;

/** Networks kept ready: enough for a burst of creates while the pool refills in the background. */
export const DEFAULT_NET_POOL = 4;

export interface LinuxDriverOptions {
  dataDir: string;
  /** Host directory bound read-only at /opt/berth (default: this package's dist directory). */
  codeDir?: string;
  /** The sandbox's first process (default: the sandbox API daemon under Node). */
  command?: string[];
  uidBase?: number;
  startTimeoutMs?: number;
  /** Network namespaces created ahead of time (0 disables the pool). */
  netPoolSize?: number;
  /**
   * Sandboxes started ahead of time (default 0). Only for a daemon that honours
   * BERTH_SANDBOX_ENV_FILE: a warm sandbox's daemon learns the spec's envs from that file.
   */
  warmPoolSize?: number;
  /** The most the default image's pool grows to while creates come fast (pool-demand.ts; default warmPoolSize). */
  warmPoolMax?: number;
  /**
   * Creates closer together than this are a burst, and the pools refill this long after the last create (default
   * REFILL_DELAY_MS; refillSoon). Tests lengthen it to make every create of theirs part of one burst.
   */
  refillDelayMs?: number;
  /**
   * The writable layer's cap the pools mount their sandboxes with until a create asks for another (default
   * WARM_SPEC.diskMb): the disk size of a sandbox created with the defaults, so that its create needs no remount.
   */
  warmDiskMb?: number;
  /**
   * IPv4 CIDRs this driver's sandboxes may reach although they are private or reserved (network.ts
   * BLOCKED_DESTINATIONS), e.g. a LAN. Per server: other servers on the host keep their own.
   */
  allowCidrs?: string[];
  /**
   * Where the roots of images other than the default are found, by id (default: the store in the data dir). The
   * driver never resolves a name: a controller resolved it in the sandbox's workspace and hands over the id.
   */
  images?: ImageRoots;
  /** DNS servers the egress proxy and Berth's DNS ask for allowed names (default: the host's resolver). */
  egressResolvers?: string[];
  /** Extra CAs (a PEM file) the egress proxy trusts for the upstreams of intercepted requests. */
  egressUpstreamCaFile?: string;
  /** Egress gateways: name → host-local addresses a sandbox's upstream connections may leave from. */
  egressGateways?: Record<string, string[]>;
  /** Audit lines of the egress proxy and Berth's DNS (one per connection or query; never header values). */
  onEgressEvent?: EgressControlOptions['onEvent'];
  /** Seconds in standby before a sandbox's memory is pushed out to swap (deep-standby.ts); 0 or absent: never. */
  deepStandbyAfterS?: number;
  /** Deep standby pages out the user's processes and keeps the API daemon resident (page-out.ts). */
  deepStandbyKeepDaemon?: boolean;
  /** The swap file made for deep standby when the host has no swap (default: none; the host's swap is used). */
  swap?: SwapOptions;
  /** A sandbox went to deep standby: its memory group before and after. */
  onDeepStandby?: (e: DeepStandbyEvent) => void;
}

/**
 * Image roots (runtime/images) that a sandbox record of this data dir runs on, live or not yet torn down: every one,
 * or those of `workspace`'s sandboxes (as their spec recorded it).
 */
export function imageRootsInUse(dataDir: string, workspace?: string): Set<string> {
  const out = new Set<string>();
  const add = (dir: string) => {
    for (const n of existsSync(dir) ? readdirSync(dir) : []) {
      const rec = readRecord(join(dir, n));
      if (rec?.rootfs && (workspace === undefined || rec.workspace === workspace)) out.add(rec.rootfs);
    }
  };
  add(join(dataDir, 'sandboxes'));
  const pools = join(dataDir, 'warm-img'); // sandboxes waiting in an image's pool run on it too
  if (workspace === undefined)
    for (const key of existsSync(pools) ? readdirSync(pools) : []) add(join(pools, key));
  return out;
}

export async function createLinuxDriver(opts: LinuxDriverOptions): Promise<LinuxDriver> {
  if (process.getuid?.() !== 0) throw new Error('the local sandbox runtime must run as root');
  await requireHostTools();
  const cgroupHost = detectCgroups();
  ensureRunDirs();
  mkdirSync(join(opts.dataDir, 'sandboxes'), { recursive: true, mode: 0o700 });
  const egressPorts = await egressPortsFor(opts.dataDir, (p) =>
    serverEntries().some((e) => e.egressPort === p.explicit && entryAlive(e)),
  );
  // Before anything else of this data dir is touched: a sweep running from here on keeps its slots (host-sweep.ts).
  const registration = registerServer(opts.dataDir, egressPorts);
  await setupHostNetwork({ dnsServers: sandboxResolvers(), egressPorts });
  // What servers killed before left on the host (their data dirs deleted, or their sandboxes dead); a failure only
  // leaves it for the next start or `berth host sweep`.
  const swept = await sweepHost(cgroupHost).then(
    (report) => ({ report }),
    (error: Error) => ({ error }),
  );
  // Then what a kill of this data dir's own server cut short: directories of sandboxes whose record was gone. Not
  // while another live driver serves the data dir (a test's inspecting driver): one of its creates may be under way.
  const unrecorded = emptySweepReport();
  const shared = serverEntries().some(
    (e) => e.file !== registration && resolve(e.dataDir) === resolve(opts.dataDir) && entryAlive(e),
  );
  if (!shared)
    await removeUnrecorded(opts.dataDir, cgroupHost, unrecorded).catch(
      (e: Error) => void unrecorded.failures.push(e.message),
    );
  const baseEtc = ensureBaseEtc(opts.dataDir);
  const seccomp = seccompFilterForHost();
  let seccompFile: string | undefined;
  if (seccomp.ok) {
    seccompFile = join(opts.dataDir, 'images', 'seccomp.bpf');
    writeFileSync(seccompFile, seccomp.bpf, { mode: 0o644 });
  }
  const deepAfterS = opts.deepStandbyAfterS ?? 0;
  const swapState: SwapState =
    deepAfterS > 0
      ? await prepareSwap(
          cgroupHost,
          opts.swap ?? { file: join(opts.dataDir, 'swap', 'berth.swap'), sizeMb: 0 },
        )
      : { available: false, reason: 'deep standby is off (BERTH_DEEP_STANDBY_AFTER is 0)' };
  const capabilities: RuntimeCapabilities = {
    freezer: !!cgroupHost.freezer,
    ...(cgroupHost.freezer ? {} : { reason: cgroupHost.freezerReason }),
    deepStandby: swapState.available,
    ...(swapState.available ? {} : { deepStandbyReason: swapState.reason }),
    ...(swapState.available && opts.deepStandbyKeepDaemon && !canPageOut()
      ? { deepStandbyDaemonReason: 'keeping the API daemon resident needs /usr/bin/perl (x86_64 or aarch64)' }
      : {}),
    seccomp: seccomp.ok,
    ...(seccomp.ok ? {} : { seccompReason: seccomp.reason }),
  };
  const allowCidrs = opts.allowCidrs ?? [];
  const netPool = new NetPool(opts.dataDir, opts.netPoolSize ?? DEFAULT_NET_POOL, allowCidrs);
  netPool.sweep();
  const ctx: HostContext = {
    dataDir: opts.dataDir,
    cgroupHost,
    uidBase: opts.uidBase ?? DEFAULT_UID_BASE,
    codeDir: opts.codeDir ?? defaultCodeDir(),
    command: opts.command ?? ['/usr/bin/node', `/opt/berth/${DAEMON_ENTRY}`],
    baseEtc,
    initLayer: ensureInitLayer(opts.dataDir),
    seccompFile,
    netPool,
    allowCidrs,
    startTimeoutMs: opts.startTimeoutMs,
    // Started on first use: a server whose sandboxes have no egress policy runs no proxy.
    egress: new EgressControl({
      ports: egressPorts,
      resolvers: opts.egressResolvers,
      allowCidrs: opts.allowCidrs,
      upstreamCaFile: opts.egressUpstreamCaFile,
      gateways: opts.egressGateways,
      onEvent: opts.onEgressEvent,
    }),
  };
  const warmPool = new WarmPool(ctx, opts.warmPoolSize ?? 0, undefined, undefined, opts.warmDiskMb);
  await warmPool.sweep();
  // Image pools of a driver that no longer runs: their sandboxes are removed (pools are made again on use).
  const imagePoolsDir = join(opts.dataDir, 'warm-img');
  for (const key of existsSync(imagePoolsDir) ? readdirSync(imagePoolsDir) : [])
    await new WarmPool(ctx, 0, key).sweep();
  // Compiled now (once per boot and helper version), not by the first create with a volume.
  driveHelper().catch(() => undefined);
  netPool.refill();
  warmPool.refill();
  const images = opts.images ?? new ImageStore({ dataDir: opts.dataDir });
  const demand = new PoolDemand(opts.warmPoolSize ?? 0, opts.warmPoolMax ?? opts.warmPoolSize ?? 0);
  const driver = new LinuxDriver(
    ctx,
    capabilities,
    warmPool,
    images,
    demand,
    registration,
    { ...swept, unrecorded },
    {
      afterMs: swapState.available ? deepAfterS * 1000 : 0,
      onDeep: opts.onDeepStandby,
      keepDaemon: opts.deepStandbyKeepDaemon,
    },
    opts.refillDelayMs,
  );
  driver.adoptNetworks();
  // Sandboxes a previous server left in standby go deep on this one's clock (a deep one stays as it is).
  if (driver.deepStandby.enabled)
    for (const i of await driver.list())
      if (i.state === 'frozen') driver.deepStandby.schedule(i.id, driver.cgroup(i.id)!);
  return driver;
}

export class LinuxDriver implements RuntimeDriver {
  private readonly locks = new Map<string, Promise<unknown>>();
  /** When the last create ended (a create starting soon after is part of a burst: refillSoon). */
  private lastEnsureMs = 0;
  /** Creates under way: the refill of a burst's pause waits for them (refillSoon). */
  private creating = 0;
  /** The start-up pass of adoptNetworks. */
  private adopting?: Promise<void>;
  /** A refill waiting for its delay (refillSoon). */
  private refillTimer?: NodeJS.Timeout;
  /** Brings the pool back to its base size after a quiet demand window. */
  private shrinkTimer?: NodeJS.Timeout;
  /** Snapshot catch-ups under way (snapshot.ts): a thaw waits for the one of its sandbox. */
  private readonly captureHolds = new Map<string, Promise<void>>();
  /** Cgroups of sandboxes thawed before: a wake-up then costs one write, not a record read (~60 µs). */
  private readonly thawable = new Map<string, SandboxCgroup>();
  /** Pools of the images used most recently, least recent first (see MAX_IMAGE_POOLS). */
  private readonly imagePools = new Map<string, WarmPool>();
  /** The recent creates on each image with a pool, by the same key: its pool's size follows them. */
  private readonly imageDemand = new Map<string, PoolDemand>();
  readonly cgroupHost: CgroupHost;
  readonly netPool: NetPool;
  /** Timers of sandboxes in standby that go deep (a disabled one when the host cannot or the setting is 0). */
  readonly deepStandby: DeepStandby;

  constructor(
    private readonly ctx: HostContext,
    readonly capabilities: RuntimeCapabilities,
    readonly warmPool: WarmPool,
    readonly images: ImageRoots,
    private readonly demand: PoolDemand = new PoolDemand(warmPool.size, warmPool.size),
    /** This driver's entry in /run/berth/servers (servers.ts). */
    private readonly registration?: string,
    /** What the host sweep at this driver's start removed, or why it failed, and this data dir's own leftovers. */
    readonly swept?: { report?: SweepReport; error?: Error; unrecorded?: SweepReport },
    deep: { afterMs: number; onDeep?: (e: DeepStandbyEvent) => void; keepDaemon?: boolean } = { afterMs: 0 },
    private readonly refillDelayMs: number = REFILL_DELAY_MS,
  ) {
    this.cgroupHost = ctx.cgroupHost;
    this.netPool = ctx.netPool;
    hostTools.retain();
    this.deepStandby = new DeepStandby(
      deep.afterMs,
      (id, fn) => this.serial(id, fn),
      deep.onDeep,
      deep.keepDaemon === true,
    );
  }

  private dir(id: string): string {
    return join(this.ctx.dataDir, 'sandboxes', id);
  }

  private paths(id: string): SandboxPaths {
    checkSandboxId(id);
    return sandboxPaths(this.ctx.dataDir, id);
  }

  /** Deterministic for the id and short (a unix socket path holds at most 107 bytes). */
  warm(): Record<string, number> {
    const out: Record<string, number> = { default: this.warmPool.readyCount };
    for (const [key, pool] of this.imagePools) out[`sha256:${key}`] = pool.readyCount;
    return out;
  }

  socketPath(id: string): string {
    return this.paths(id).socketPath;
  }

  /** The sandbox's cgroups (for tests and the metering code); undefined when unknown. */
  cgroup(id: string): SandboxCgroup | undefined {
    const rec = readRecord(this.dir(id));
    return rec ? new SandboxCgroup(this.cgroupHost, rec.name) : undefined;
  }

  private serial<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(id) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.locks.set(id, tail);
    void tail.then(() => {
      if (this.locks.get(id) === tail) this.locks.delete(id);
    });
    return next;
  }

  private alive(rec: SandboxRecord): boolean {
    return (
      isProcessAlive(rec.pid, rec.pidStart) && new SandboxCgroup(this.cgroupHost, rec.name).pids().length > 0
    );
  }

  private info(rec: SandboxRecord): SandboxInfo {
    const alive = this.alive(rec);
    const frozen = alive && new SandboxCgroup(this.cgroupHost, rec.name).isFrozen();
    const ended = alive ? undefined : this.endOf(rec);
    return {
      id: rec.id,
      state: !alive ? 'dead' : frozen ? 'frozen' : 'running',
      pid: rec.pid,
      hostUid: rec.hostUid,
      address: rec.address,
      socketPath: rec.socketPath,
      specHash: rec.specHash,
      image: rec.image,
      createdAt: rec.createdAt,
      ...(ended ? { ended } : {}),
      ...(rec.owner ? { owner: rec.owner } : {}),
      ...(frozen && this.deepStandby.isDeep(rec.id) ? { deepStandby: true } : {}),
      ...(alive && unfinished(rec) ? { unfinished: true } : {}),
    };
  }

  /**
   * What a dead sandbox leaves to read until its teardown: its cgroup's counters and its layer's use, while its slot
   * is still its own (once released, the names may be another sandbox's); else what the host sweep recorded.
   */
  private endOf(rec: SandboxRecord): SandboxEnd | undefined {
    if (slotOwner(rec.slot) !== this.dir(rec.id)) return rec.ended;
    return sandboxEnd(this.cgroupHost, rec.name) ?? rec.ended;
  }

  ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo> {
    checkSandboxId(id);
    checkSpec(spec);
    this.thawable.delete(id); // a replaced sandbox has another cgroup
    const hash = specHash(spec);
    return this.serial(id, async () => {
      const rec = readRecord(this.dir(id));
      // A sandbox a killed server had not finished starting (its daemon not reachable yet, or its volumes not all
      // mounted) is replaced, never adopted half-made.
      if (rec && rec.specHash === hash && !unfinished(rec) && this.alive(rec)) {
        if (!samePolicy(this.ctx.egress.current(rec.address), spec.egress))
          await this.applyEgress(rec, spec.egress);
        return this.info(rec);
      }
      if (rec || existsSync(this.dir(id))) await this.teardown(id);
      // Part of a burst when it follows the end of the previous create closely: a cold start under load takes longer
      // than the delay, and the burst has not paused meanwhile.
      const burst = Date.now() - this.lastEnsureMs < this.refillDelayMs;
      this.creating++;
      let imageKey: string | undefined;
      try {
        const made = await this.create(id, spec, hash);
        imageKey = made.imageKey;
        return made.info;
      } catch (e) {
        await this.teardown(id).catch(() => undefined);
        throw e;
      } finally {
        this.creating--;
        this.refillSoon(burst, imageKey);
      }
    });
  }

  /** Makes the sandbox; says which image's pool it was a create of (and so refills), if an image's. */
  private async create(
    id: string,
    spec: SandboxSpec,
    hash: string,
  ): Promise<{ info: SandboxInfo; imageKey?: string }> {
    const host = isDefaultImage(spec.image);
    const image = host ? undefined : this.imageOf(spec.image);
    // Pools hold sandboxes of an image as it is: a build's steps over it, or another user, start fresh.
    const poolable = !spec.layers?.length && !spec.snapshotLayers?.length && spec.user === undefined;
    const pool = !poolable ? undefined : image ? await this.imagePool(image) : this.warmPool;
    const imageKey = image && pool ? imagePoolKey(image.id) : undefined;
    // A warm sandbox has run without a policy: one under a policy starts fresh, policed from its first packet.
    // Volumes are no reason to start cold: they are mounted into the running sandbox either way (mountVolumes).
    checkVolumeDirs(spec);
    const warm = !spec.egress ? pool?.take(spec.diskMb) : undefined;
    const rec = warm
      ? await this.assign(warm, id, spec, hash)
      : await startSandbox(this.ctx, { dir: this.dir(id), id, paths: this.paths(id), spec, hash, image });
    if (rec.mountsPending) await this.mountVolumes(rec, spec);
    return { info: this.info(rec), imageKey };
  }

  /** The stored image of an id; a name is refused: names belong to workspaces, and the runtime knows none. */
  private imageOf(id: string): StoredImage {
    if (id === SCRATCH_IMAGE)
      return {
        id,
        digest: '',
        layers: [],
        config: { env: [] },
        size: 0,
        unpackedBytes: 0,
        rootfs: EMPTY_DIR,
        createdAt: new Date(0).toISOString(),
      };
    if (!isImageId(id))
      throw new Error(
        `the runtime runs images by id (sha256:<hex>), resolved in the sandbox's workspace first, not ${JSON.stringify(id)}`,
      );
    const image = this.images.get(id);
    if (!image) throw new Error(`image ${id} is not in the image store`);
    return image;
  }

  /**
   * Mounts the spec's volumes into the sandbox's mount namespace with the drive helper (decision 031), all in one
   * run: each id-mapped so that files are stored as uid 0 on disk and show as the sandbox's own user (no re-owning
   * at attach), read-only when asked. The record says the mounts are done only once they are.
   */
  private async mountVolumes(rec: SandboxRecord, spec: SandboxSpec): Promise<void> {
    const pid = namespacePid(new SandboxCgroup(this.cgroupHost, rec.name).pids());
    if (pid === undefined) throw new Error('the sandbox has no process to mount its volumes into');
    for (const v of spec.volumes) await storeAsRoot(v.hostPath);
    await attachMounts(
      pid,
      rec.hostUid,
      spec.volumes.map((v) => ({
        driveRoot: v.hostPath,
        subPath: '',
        mountPath: normalize(v.mountPath), // as spec-check.ts judged it
        readOnly: v.readOnly,
      })),
    );
    rec.mountsPending = undefined;
    await writeRecordAsync(this.dir(rec.id), rec);
  }

  /** The pool of the image `id` while it has one (tests look at its sandboxes and starts). */
  imagePoolOf(id: string): WarmPool | undefined {
    return this.imagePools.get(imagePoolKey(id));
  }

  /** The pool of an image (made on first use, the least recently used one closed past MAX_IMAGE_POOLS). */
  private async imagePool(image: StoredImage): Promise<WarmPool | undefined> {
    if (this.warmPool.size === 0) return undefined;
    const key = imagePoolKey(image.id);
    let pool = this.imagePools.get(key);
    if (pool) this.imagePools.delete(key);
    else {
      pool = new WarmPool(this.ctx, IMAGE_POOL_SIZE, key, image, this.warmPool.layerMb);
      this.imageDemand.set(key, new PoolDemand(IMAGE_POOL_SIZE, IMAGE_POOL_MAX));
      await pool.sweep();
    }
    this.imagePools.set(key, pool);
    for (const [k, p] of this.imagePools) {
      if (this.imagePools.size <= MAX_IMAGE_POOLS) break;
      this.imagePools.delete(k);
      this.imageDemand.delete(k);
      void p.close().catch(() => undefined);
    }
    return pool;
  }

  /** Turns a warm sandbox into `id`: limits, disk size and envs of the spec, then its names. */
  private async assign(w: WarmSandbox, id: string, spec: SandboxSpec, hash: string): Promise<SandboxRecord> {
    const rec = w.rec;
    try {
      new SandboxCgroup(this.cgroupHost, rec.name).setLimits({
        memoryMb: spec.memoryMb,
        pidsMax: Math.max(MIN_PIDS, spec.pidsMax),
        cpuShares: spec.cpuShares,
      });
      await resizeWritableLayer(join(LAYERS_DIR, rec.name), spec.diskMb); // a no-op at the pool's size
      writeEnvFile(sandboxRunDir(rec.name), rec.hostUid, sandboxEnv(id, spec));
    } catch (e) {
      await teardownSandbox(this.ctx, w.dir, w.paths).catch(() => undefined);
      throw e;
    }
    // Renames on the host only: the listening socket answers under any name.
    const to = this.paths(id);
    renameSync(w.paths.socketPath, to.socketPath);
    // The state dir moves under the slots' lock with its claim: the claim never names a missing directory.
    if (!(await transferSlot(rec.slot, w.dir, this.dir(id), { move: true }))) {
      try {
        renameSync(to.socketPath, w.paths.socketPath);
      } catch {}
      await teardownSandbox(this.ctx, w.dir, w.paths).catch(() => undefined);
      throw new Error(`the warm sandbox ${rec.name} could not be handed its slot's claim`);
    }
    Object.assign(rec, {
      id,
      specHash: hash,
      ...(spec.volumes.length ? { mountsPending: true } : {}),
      image: spec.image,
      workspace: spec.owner?.workspace,
      owner: spec.owner,
      socketPath: this.socketPath(id),
      createdAt: new Date().toISOString(),
    });
    await writeRecordAsync(this.dir(id), rec);
    return rec;
  }

  async inspect(id: string): Promise<SandboxInfo | undefined> {
    checkSandboxId(id);
    const rec = readRecord(this.dir(id));
    return rec ? this.info(rec) : undefined;
  }

  async list(): Promise<SandboxInfo[]> {
    const root = join(this.ctx.dataDir, 'sandboxes');
    const out: SandboxInfo[] = [];
    for (const id of existsSync(root) ? readdirSync(root) : []) {
      const rec = readRecord(join(root, id));
      if (rec) out.push(this.info(rec));
    }
    return out;
  }

  private live(id: string): SandboxCgroup {
    checkSandboxId(id);
    const rec = readRecord(this.dir(id));
    if (!rec) throw new SandboxNotFoundError(id);
    if (!this.alive(rec)) throw new Error(`sandbox ${id} is not running`);
    return new SandboxCgroup(this.cgroupHost, rec.name);
  }

  freeze(id: string, signal?: AbortSignal): Promise<void> {
    return this.serial(id, async () => {
      const cg = this.live(id);
      await cg.freeze(signal);
      if (!signal?.aborted) this.deepStandby.schedule(id, cg);
    });
  }

  /** Pushes a frozen sandbox's memory out now, as its deep-standby timer would; false when it is not frozen. */
  deepen(id: string): Promise<boolean> {
    return this.serial(id, () => this.deepStandby.release(id, this.live(id)));
  }

  thaw(id: string): Promise<void> {
    // Not serialised behind a slow ensure: a thaw is what a waiting request needs right now. A deep sandbox's
    // thaw is the same write: its pages come back from swap as its processes touch them. Only a snapshot's frozen
    // catch-up holds it (tens of ms): a write let through then would be caught half-way (decision 053).
    const held = this.captureHolds.get(id);
    if (held) return held.then(() => this.thaw(id));
    this.deepStandby.cancel(id);
    let cg = this.thawable.get(id);
    if (!cg) {
      cg = this.live(id);
      this.thawable.set(id, cg);
    }
    try {
      cg.thaw();
    } catch (err) {
      this.thawable.delete(id);
      throw err;
    }
    return Promise.resolve();
  }

  async setEnvs(id: string, envs: Record<string, string>): Promise<void> {
    checkSandboxId(id);
    const rec = readRecord(this.dir(id));
    if (!rec) throw new SandboxNotFoundError(id);
    // The daemon reads this file at every process start (see sandbox-api/process/spec.ts).
    const runDir = sandboxRunDir(rec.name);
    const kept: Record<string, string> = {};
    if (rec.egress) {
      // The egress variables belong to the policy, not to the spec's envs: they stay.
      const old = readEnvFile(runDir);
      for (const k of EGRESS_ENV_KEYS) if (k in old) kept[k] = old[k];
    }
    writeEnvFile(runDir, rec.hostUid, { ...envs, ...kept, BERTH_SANDBOX_ID: id });
  }

  setEgress(id: string, policy: EgressPolicy | undefined): Promise<void> {
    checkSandboxId(id);
    return this.serial(id, async () => {
      const rec = readRecord(this.dir(id));
      if (!rec) throw new SandboxNotFoundError(id);
      if (!samePolicy(this.ctx.egress.current(rec.address), policy)) await this.applyEgress(rec, policy);
    });
  }

  /**
   * Applies a policy to a live sandbox and records it. The proxy variables follow in the env file (processes
   * started from now on); running processes are redirected either way.
   */
  private async applyEgress(rec: SandboxRecord, policy: EgressPolicy | undefined): Promise<void> {
    const runDir = sandboxRunDir(rec.name);
    let added: Record<string, string> = {};
    if (policy)
      added = await this.ctx.egress.apply(
        { address: rec.address, hostAddress: rec.hostAddress, runDir, uid: rec.hostUid, label: rec.id },
        policy,
      );
    else await this.ctx.egress.release(rec.address);
    const envs = readEnvFile(runDir);
    for (const k of EGRESS_ENV_KEYS) delete envs[k];
    writeEnvFile(runDir, rec.hostUid, { ...envs, ...added });
    rec.egress = policy && withoutSecrets(policy);
    writeRecord(this.dir(rec.id), rec);
  }

  async stats(id: string): Promise<SandboxStats | undefined> {
    const rec = readRecord(this.dir(id));
    if (!rec || !this.alive(rec)) return undefined;
    const s: SandboxStats = new SandboxCgroup(this.cgroupHost, rec.name).stats();
    try {
      const fs = statfsSync(join(LAYERS_DIR, rec.name));
      s.disk = { usedBytes: (fs.blocks - fs.bfree) * fs.bsize, limitBytes: fs.blocks * fs.bsize };
    } catch {
      // torn down meanwhile
    }
    return s;
  }

  async daemonLog(id: string, maxBytes = DAEMON_LOG_TAIL_BYTES): Promise<string | undefined> {
    checkSandboxId(id);
    return readTail(join(this.dir(id), DAEMON_LOG), maxBytes);
  }

  ensureVolume(ref: VolumeRef, sizeMb: number, seed?: string, create = true): Promise<string> {
    const key = `volume:${volumeDir(this.ctx.dataDir, ref)}`; // also checks the names
    return this.serial(key, () => ensureVolume(this.ctx.dataDir, ref, sizeMb, seed, create));
  }

  volumesHere(): Promise<VolumeRef[]> {
    return Promise.resolve(volumesOnDisk(this.ctx.dataDir));
  }

  removeVolume(ref: VolumeRef): Promise<void> {
    const key = `volume:${volumeDir(this.ctx.dataDir, ref)}`;
    return this.serial(key, async () => {
      if (ref.drive) await this.detachEverywhere(ref);
      await removeVolume(this.ctx.dataDir, ref);
    });
  }

  /**
   * Detaches a drive about to be deleted from every running sandbox that has it, so none keeps a view of a
   * drive that no longer exists. Best effort per sandbox: one that cannot be reached (going away) keeps its view
   * until it goes, and the host's lazy unmount still frees the image then.
   */
  private async detachEverywhere(ref: VolumeRef): Promise<void> {
    const root = join(this.ctx.dataDir, 'sandboxes');
    for (const id of existsSync(root) ? readdirSync(root) : []) {
      await this.serial(id, async () => {
        const pid = this.namespacePidOf(id);
        if (pid === undefined) return;
        for (const m of drivesIn(this.ctx.dataDir, pid))
          if (m.drive.workspace === ref.workspace && m.drive.name === ref.name)
            await detachDrive(pid, m.mountPath);
      }).catch(() => undefined);
    }
  }

  mountDrive(id: string, m: DriveMount): Promise<string> {
    checkSandboxId(id);
    return this.serial(id, async () => {
      const { pid, uid } = this.namespaceOf(id);
      const driveRoot = volumeMountPoint(this.ctx.dataDir, m.drive);
      const subPath = m.drivePath.replace(/^\/+|\/+$/g, '');
      return attachDrive(pid, uid, { ...m, driveRoot, subPath });
    });
  }

  unmountDrive(id: string, mountPath: string): Promise<void> {
    checkSandboxId(id);
    return this.serial(id, async () => detachDrive(this.namespaceOf(id).pid, mountPath));
  }

  driveMounts(id: string): Promise<DriveMount[]> {
    checkSandboxId(id);
    return this.serial(id, async () => drivesIn(this.ctx.dataDir, this.namespaceOf(id).pid));
  }

  /** A task in the sandbox's namespaces and the host uid its root maps to. */
  private namespaceOf(id: string): { pid: number; uid: number } {
    const rec = readRecord(this.dir(id));
    const pid = this.namespacePidOf(id);
    if (!rec || pid === undefined) throw new SandboxNotFoundError(id);
    return { pid, uid: rec.hostUid };
  }

  /** A task in the running sandbox's mount namespace; undefined when the sandbox does not run. */
  private namespacePidOf(id: string): number | undefined {
    const rec = readRecord(this.dir(id));
    if (!rec || !this.alive(rec)) return undefined;
    return namespacePid(new SandboxCgroup(this.cgroupHost, rec.name).pids());
  }

  remove(id: string): Promise<void> {
    checkSandboxId(id);
    this.thawable.delete(id);
    this.deepStandby.cancel(id);
    return this.serial(id, () => this.teardown(id));
  }

  private teardown(id: string): Promise<void> {
    return teardownSandbox(this.ctx, this.dir(id), this.paths(id));
  }

  /**
   * Tops the pools up refillDelayMs (REFILL_DELAY_MS) after a create. Not at once: a user's first calls come right
   * after the create, and a refill (spawning bwrap and `ip`, a Node start, a new network namespace) on the same cores
   * doubled create → first exec (measured 58 → 23 ms p50 on 2 cores). In a burst (creates less than the delay
   * apart) the refill waits for the burst's pause; a pool about to run dry refills at once, one start at a time
   * while creates keep coming (decision 084).
   */
  private refillSoon(burst: boolean, imageKey?: string): void {
    const now = Date.now();
    this.lastEnsureMs = now;
    if (imageKey !== undefined) this.imageCreated(imageKey, burst, now);
    else {
      this.demand.record(now);
      this.warmPool.setTarget(this.demand.target(now));
    }
    // In a burst the pool grown by the creates before it serves the next ones: starting replacements now would
    // take the cores those creates run on. Only a pool about to run dry refills at once; in a burst, only one that
    // has run dry (the next creates start cold whatever the refill does: it must not slow them more than that).
    const warmLow = this.warmPool.readyCount <= (burst ? 0 : 1);
    const urgent = warmLow || this.netPool.readyCount === 0;
    if (this.refillTimer && !urgent && !burst) return;
    if (warmLow && burst) {
      // Creates are still coming and start cold: four starts beside them (a full refill) made the burst's last
      // creates wait hundreds of ms for the cores. One at a time keeps a sandbox coming; the full refill follows the
      // burst's pause (the timer below). A burst served by the warm pool needs no network from the net pool: an
      // empty one waits for the pause too.
      this.netPool.refill();
      this.warmPool.refill(1);
    }
    clearTimeout(this.refillTimer);
    this.refillTimer = setTimeout(
      () => {
        this.refillTimer = undefined;
        // A create still under way (a cold start past the emptied pool) is the burst going on: its end re-arms this.
        if (this.creating > 0) return;
        this.netPool.refill();
        this.warmPool.refill();
        for (const p of this.imagePools.values()) p.refill();
        this.shrinkLater();
      },
      urgent && !burst ? 0 : burst ? BURST_PAUSE_FACTOR * this.refillDelayMs : this.refillDelayMs,
    );
  }

  /**
   * A create on an image with a pool: the pool's size follows that image's recent creates, and a pool the create
   * left low refills at once (one start at a time in a burst, as the default pool does), not after the pause: the
   * timer below is pushed on by every create of any image, and creates alternating between two images (a default
   * sandbox, then one on an image, a second apart) kept an image's single sandbox from ever being replaced in time.
   */
  private imageCreated(key: string, burst: boolean, now: number): void {
    const pool = this.imagePools.get(key);
    const demand = this.imageDemand.get(key);
    if (!pool || !demand) return;
    demand.record(now);
    pool.setTarget(demand.target(now));
    if (pool.readyCount <= (burst ? 0 : 1)) pool.refill(burst ? 1 : undefined);
  }

  /** Once no create came for the demand window, the pools go back to their base sizes. */
  private shrinkLater(): void {
    clearTimeout(this.shrinkTimer);
    this.shrinkTimer = setTimeout(() => {
      const now = Date.now();
      this.warmPool.setTarget(this.demand.target(now));
      for (const [key, pool] of this.imagePools)
        pool.setTarget(this.imageDemand.get(key)?.target(now) ?? pool.size);
    }, DEMAND_WINDOW_MS + 1_000);
    this.shrinkTimer.unref();
  }

  /**
   * Re-applies the namespace setup (IPv6 off, the ingress rule) and the private ranges of this server's setting to
   * every live sandbox, in the background: sandboxes started by a server without them (or whose rule was lost) get
   * IPv6 turned off and their ports reachable again, and ones started under another BERTH_SANDBOX_ALLOW_CIDRS (a previous run of this data dir,
   * live or killed) get this one. Failures are left to the next start.
   */
  adoptNetworks(): void {
    const root = join(this.ctx.dataDir, 'sandboxes');
    this.adopting = (async () => {
      for (const id of existsSync(root) ? readdirSync(root) : []) {
        const rec = readRecord(join(root, id));
        if (!rec || !this.alive(rec)) continue;
        await setupNamespace(slotNet(rec.slot, rec.name)).catch(() => undefined);
        // Serialised and re-read: once removed, the address's slot may be another server's.
        await this.serial(rec.id, async () => {
          const now = readRecord(join(root, id));
          if (now && this.alive(now)) await setAllowedRanges(now.address, this.ctx.allowCidrs);
        }).catch(() => undefined);
        // Without secrets (records never hold them): routed requests answer 503 until the controller re-applies.
        // Serialised with the sandbox's other operations and re-read: a removal may have come first.
        if (rec.egress)
          await this.serial(rec.id, async () => {
            const now = readRecord(join(root, id));
            if (now?.egress && this.alive(now)) await this.applyEgress(now, now.egress);
          }).catch(() => undefined);
      }
    })();
  }

  /** Resolves once both pools have finished refilling (refills start REFILL_DELAY_MS after each ensure). */
  async poolsIdle(): Promise<void> {
    while (this.refillTimer) await sleep(5);
    await Promise.all([
      this.netPool.whenIdle(),
      this.warmPool.whenIdle(),
      ...[...this.imagePools.values()].map((p) => p.whenIdle()),
    ]);
  }

  /** True while a sandbox record (live or not yet torn down) runs on the image root `rootfs`. */
  usesRoot(rootfs: string): boolean {
    const root = join(this.ctx.dataDir, 'sandboxes');
    return (existsSync(root) ? readdirSync(root) : []).some(
      (id) => readRecord(join(root, id))?.rootfs === rootfs,
    );
  }

  exportChanges(id: string, dest: string): Promise<void> {
    checkSandboxId(id);
    return this.serial(id, async () => {
      const rec = readRecord(this.dir(id));
      if (!rec) throw new SandboxNotFoundError(id);
      // Nothing may write while the layer is read: every process ends first, the layer stays until removal.
      const cg = new SandboxCgroup(this.cgroupHost, rec.name);
      await cg.kill();
      if (isProcessAlive(rec.pid, rec.pidStart)) process.kill(rec.pid, 'SIGKILL');
      await copyChanges(join(LAYERS_DIR, rec.name), dest);
    });
  }

  captureChanges(id: string, dest: string): Promise<{ pausedMs: number }> {
    checkSandboxId(id);
    return this.serial(id, async () => {
      const rec = readRecord(this.dir(id));
      if (!rec) throw new SandboxNotFoundError(id);
      if (!this.alive(rec)) throw new Error(`sandbox ${id} is not running`);
      return captureLayer(
        new SandboxCgroup(this.cgroupHost, rec.name),
        join(LAYERS_DIR, rec.name),
        dest,
        (held) => {
          this.captureHolds.set(id, held);
          void held.then(() => {
            if (this.captureHolds.get(id) === held) this.captureHolds.delete(id);
          });
        },
      );
    });
  }

  /** Host path of the sandbox's writable layer (what it wrote over its root is in `<layer>/ovl/root/upper`). */
  layerDir(id: string): string | undefined {
    const rec = readRecord(this.dir(id));
    return rec ? join(LAYERS_DIR, rec.name) : undefined;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.locks.values(), this.adopting]);
    clearTimeout(this.refillTimer);
    this.refillTimer = undefined;
    clearTimeout(this.shrinkTimer);
    await this.warmPool.close();
    for (const p of this.imagePools.values()) await p.close();
    await this.netPool.close();
    await this.ctx.egress.close();
    this.deepStandby.close();
    await unexposeUnder(this.ctx.dataDir);
    if (this.registration) unregisterServer(this.registration);
    await hostTools.release();
  }
}

/** An env file bigger than this was not written by us. */
const MAX_ENV_FILE_BYTES = 4 * 1024 * 1024;

/**
 * The env file as the sandbox has it. The run dir is the sandbox's: the name is opened without following a
 * symlink (it could point at another sandbox's env file) and only a regular file of sane size is read.
 */
function readEnvFile(runDir: string): Record<string, string> {
  let fd: number | undefined;
  try {
    fd = openSync(join(runDir, 'env.json'), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_ENV_FILE_BYTES) return {};
    const parsed = JSON.parse(readFileSync(fd, 'utf8'));
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** A start cut short: the daemon's socket not linked where the server reaches it, or the volumes not mounted. */
const unfinished = (rec: SandboxRecord) =>
  rec.socketPending === true || rec.mountsPending === true || !existsSync(rec.socketPath);
