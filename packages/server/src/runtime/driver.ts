// The runtime driver contract: the only boundary through which controllers touch the operating system.
// A Kubernetes driver (DESIGN.md §6) implements the same interface; controllers never learn which one runs.
import { createHash } from 'node:crypto';
import type { EgressPolicy } from './egress/policy.js';

export type { EgressPolicy };

export interface VolumeMount {
  /** Directory on the host; the runtime owns it and makes it writable by the sandbox unless readOnly. */
  hostPath: string;
  /** Absolute path inside the sandbox. */
  mountPath: string;
  readOnly: boolean;
}

/** A volume's identity in the runtime: names are scoped by workspace on disk too. */
export interface VolumeRef {
  workspace: string;
  name: string;
  /** A drive (shared storage, decision 031): made like a volume, kept apart on disk. */
  drive?: boolean;
}

/** A drive attached live to a running sandbox (decision 031). */
export interface DriveMount {
  drive: VolumeRef;
  /** Directory of the drive to attach, relative to its root ('' or '/': all of it). */
  drivePath: string;
  /** Absolute path inside the sandbox. */
  mountPath: string;
  readOnly: boolean;
}

/** What a runtime instance is for: a Sandbox object, a replica of an agent or function, a build step, a job task. */
export type InstanceRole = 'sandbox' | 'replica' | 'build' | 'task';

/** The object that owns a runtime instance (as Kubernetes' owner references): kind, workspace, name, and role. */
export interface InstanceOwner {
  /** The owner's kind: Sandbox, Agent, Function, Job (a build is owned by the object it builds). */
  kind: string;
  workspace: string;
  name: string;
  role: InstanceRole;
}

export interface SandboxSpec {
  memoryMb: number;
  /** Tasks (threads count) allowed in the sandbox; the driver raises anything below MIN_PIDS. */
  pidsMax: number;
  /** Relative CPU weight; see defaultCpuShares(). */
  cpuShares: number;
  /** Cap of the writable layer: everything the sandbox writes anywhere in its root (decision 051). */
  diskMb: number;
  /** Environment of the sandbox API daemon and so of every process it starts; already decrypted. */
  envs: Record<string, string>;
  /**
   * '' and every spelling of `blaxel/base-image:latest` (kinds/image-reference.ts DEFAULT_IMAGE) run the host's own
   * userland; anything else is an image id (`sha256:<hex>`) of the image store, which the caller resolved
   * from a name in the sandbox's workspace (names belong to workspaces; the runtime knows none), or SCRATCH_IMAGE
   * (nothing: only with `layers`). An id the store lacks, or a name, fails the start with the reason. Never a silent
   * fallback. Either way the image is the sandbox's root, writable on top (copy-on-write into its capped layer).
   */
  image: string;
  /**
   * Directories stacked over the image, topmost first, read-only underneath like the image (a Dockerfile build's
   * steps so far): each a layer as overlayfs keeps one (whiteouts as 0/0 character devices, opaque directories
   * marked), owned by root. Not with the default image.
   */
  layers?: string[];
  /**
   * Snapshot layers (decision 053), topmost first: directories each holding one subdirectory per overlay of the root
   * (`root`, and for the default image `usr`…), in overlayfs' format as `captureChanges` wrote them. Stacked under
   * the writable layer, over the image (and `layers`), read-only and shared: a restore or a fork costs no copy.
   * With any image, the default one included.
   */
  snapshotLayers?: string[];
  /** Who processes run as, `uid[:gid]` in numbers, instead of the image config's User (a build's USER). */
  user?: string;
  /**
   * The object the instance runs for (its workspace among it): recorded with it and returned by `list`, so that a
   * node can say what it holds and for whom, which images a workspace has in use can be told, and the garbage
   * collector can ask the owner's kind whether it still wants it (runtime/instances.ts). Resolves nothing, and is
   * not part of the spec hash (a label, not what runs).
   */
  owner?: InstanceOwner;
  volumes: VolumeMount[];
  /**
   * Egress policy (domains allowed and forbidden): when set, the sandbox reaches only what it allows, through
   * the egress proxy and Berth's DNS. Not part of the spec hash: it changes live (setEgress), never replaces.
   */
  egress?: EgressPolicy;
}

/** The empty image (Docker's `FROM scratch`): a root of `layers` only. */
export const SCRATCH_IMAGE = 'scratch';

/** Node needs about 7 tasks and hangs (does not fail) below its need, so never go under this. */
export const MIN_PIDS = 64;

/**
 * The lowest CPU weight the kernel takes (cgroup v1 cpu.shares 2; cgroup2 cpu.weight 1): work nobody waits on now
 * (a build, a warm sandbox waiting in its pool) runs on what serving sandboxes leave and never delays their start or
 * their requests. Idle cores are still used in full: a weight divides only contended CPU.
 */
export const BACKGROUND_CPU_SHARES = 2;

/** One CPU's worth of shares (1024) per 2 GiB of memory, the service's memory-to-CPU ratio. */
export function defaultCpuShares(memoryMb: number): number {
  return Math.max(2, Math.round((1024 * memoryMb) / 2048));
}

export type SandboxState = 'running' | 'frozen' | 'dead';

export interface SandboxInfo {
  id: string;
  state: SandboxState;
  /** Host pid of the sandbox's outermost process (bubblewrap); 0 when unknown. */
  pid: number;
  /** Unprivileged host uid the sandbox runs as (root inside its own user namespace). */
  hostUid: number;
  /** The sandbox's private IPv4 address (reachable from the host only). */
  address: string;
  /** Host path of the sandbox API unix socket. */
  socketPath: string;
  specHash: string;
  image: string;
  createdAt: string;
  /** For a dead sandbox whose resources are still there: what its last moments left to read. */
  ended?: SandboxEnd;
  /** Who it runs for, as its spec said; absent for an instance started before owners were recorded. */
  owner?: InstanceOwner;
  /** Frozen with its memory pushed out to swap (deep standby); a wake brings the pages back on demand. */
  deepStandby?: boolean;
  /**
   * Live, but its start never finished (a server killed between launching it and reaching its daemon, or mounting
   * its volumes): no request can use it, and `ensure` replaces it rather than adopt it.
   */
  unfinished?: boolean;
}

/** What is known of how a sandbox's processes ended, read after the fact from its cgroup and writable layer. */
export interface SandboxEnd {
  /** Processes the kernel's out-of-memory killer ended in the sandbox, over its whole life. */
  oomKills: number;
  memoryLimitBytes: number;
  /** What its writable layer held: files written there count toward its memory. */
  diskUsedBytes?: number;
}

export interface SandboxStats {
  memoryBytes: number;
  memoryLimitBytes: number;
  memoryPeakBytes: number;
  /** Times the OOM killer ran inside this sandbox. */
  oomKills: number;
  pids: number;
  pidsMax: number;
  /** CPU time used by every process the sandbox ever ran, in seconds; absent where the host does not account it. */
  cpuSeconds?: number;
  /** Its writable layer (/home/user, /tmp, /workspace, /var): bytes used against the cap; absent when unknown. */
  disk?: { usedBytes: number; limitBytes: number };
}

export interface RuntimeCapabilities {
  /** Standby by freezing is available. */
  freezer: boolean;
  /** Why not, when freezer is false. */
  reason?: string;
  /** Deep standby (a frozen sandbox's memory pushed out to swap) is on; false where the host has no swap to use. */
  deepStandby: boolean;
  deepStandbyReason?: string;
  /** Why BERTH_DEEP_STANDBY_DAEMON=resident cannot be honoured here (deep standby then pushes the daemon out too). */
  deepStandbyDaemonReason?: string;
  /** A seccomp filter is applied to sandbox processes. */
  seccomp: boolean;
  seccompReason?: string;
}

export interface RuntimeDriver {
  readonly capabilities: RuntimeCapabilities;
  /**
   * Makes the sandbox exist and answer on its socket. Idempotent: the same spec returns the running
   * sandbox untouched; a different spec (or a dead sandbox) replaces it.
   */
  ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo>;
  inspect(id: string): Promise<SandboxInfo | undefined>;
  /** Every sandbox this driver's data dir knows, live or dead, with its owner (re-adoption after a restart). */
  list(): Promise<SandboxInfo[]>;
  /**
   * Freezes the sandbox; resolves once every task is stopped. When `signal` aborts first (a request arrived), it
   * gives up at once and leaves the sandbox running.
   */
  freeze(id: string, signal?: AbortSignal): Promise<void>;
  thaw(id: string): Promise<void>;
  /** Kills every process and deletes all the sandbox's resources; idempotent. */
  remove(id: string): Promise<void>;
  socketPath(id: string): string;
  stats(id: string): Promise<SandboxStats | undefined>;
  /**
   * The last `maxBytes` of what the sandbox's API daemon wrote (its stdout and stderr), live or dead, until the
   * sandbox is removed; undefined when there is none to read.
   */
  daemonLog(id: string, maxBytes?: number): Promise<string | undefined>;
  /** Sets the environment of the processes the sandbox starts from now on (running ones keep theirs). */
  setEnvs(id: string, envs: Record<string, string>): Promise<void>;
  /**
   * Makes a volume exist with a hard cap of `sizeMb` (writes past it fail with ENOSPC) and returns the host
   * directory to put in `SandboxSpec.volumes`. Idempotent: an existing volume keeps its size and data; `seed`
   * (a tar or tar.gz file) fills a new one only. With `create` false (a holder attaching a volume made before) a
   * volume whose data is not on this machine is never made anew, empty: VolumeMissingError.
   */
  ensureVolume(ref: VolumeRef, sizeMb: number, seed?: string, create?: boolean): Promise<string>;
  /**
   * Deletes a volume and its data; idempotent. The caller makes sure nothing holds a volume; a drive is first
   * detached from every sandbox that has it mounted.
   */
  removeVolume(ref: VolumeRef): Promise<void>;
  /** The volumes (not drives) whose data is on this machine. */
  volumesHere(): Promise<VolumeRef[]>;
  /**
   * Attaches a drive (made by ensureVolume with `drive`) to the running sandbox at `mountPath`, several
   * sandboxes at once; files show as the sandbox's root in every one. Fails when the directory is missing.
   * Resolves with the mount point as the sandbox's mount table names it (symlinks in `mountPath` resolved).
   */
  mountDrive(id: string, m: DriveMount): Promise<string>;
  /** Detaches what is mounted at `mountPath` in the sandbox (a sandbox's removal detaches everything). */
  unmountDrive(id: string, mountPath: string): Promise<void>;
  /** The drives mounted in the running sandbox, as the sandbox's own mount table has them. */
  driveMounts(id: string): Promise<DriveMount[]>;
  /** Replaces the sandbox's egress policy live (undefined: none); connections no longer allowed are closed. */
  setEgress(id: string, policy: EgressPolicy | undefined): Promise<void>;
  /**
   * Stops every process of the sandbox and copies what it changed in its root (its writable layer over the image:
   * files whole, deletions as whiteouts, replaced directories marked opaque, as overlayfs keeps them; owners set to
   * root) into the empty directory `dest`. What a Dockerfile build's RUN produced; the sandbox is removed after.
   */
  exportChanges(id: string, dest: string): Promise<void>;
  /**
   * Copies what the running (or frozen) sandbox changed in its root into the empty directory `dest`, one
   * subdirectory per overlay (`root`, `usr`…), as a snapshot layer (decision 053): the sandbox is frozen for the
   * copy only, then thawed (left frozen if it was in standby); its processes and connections carry on. Files only:
   * memory and processes are not captured. Resolves with how long the sandbox was paused.
   */
  captureChanges(id: string, dest: string): Promise<{ pausedMs: number }>;
  /**
   * Sandboxes started ahead and ready in its warm pools, by image: `default` for the default image, `sha256:<id
   * prefix>` for an image of the store. A node reports it at each heartbeat for placement (cluster/placement.ts).
   */
  warm?(): Record<string, number>;
  /** Releases the driver's own resources; sandboxes keep running. */
  close(): Promise<void>;
}

/** A sandbox went to deep standby: what its memory group held before and after (what stays is kernel memory). */
export interface DeepStandbyEvent {
  id: string;
  beforeBytes: number;
  afterBytes: number;
}

/** Thrown for operations on a sandbox the driver does not know. */
/** A volume's data is not on this machine (made on another node of a cluster, or its data dir lost it). */
export class VolumeMissingError extends Error {
  override name = 'VolumeMissingError';
  constructor(ref: VolumeRef) {
    super(`the data of volume ${JSON.stringify(ref.name)} is not on this machine`);
  }
}

export class SandboxNotFoundError extends Error {
  constructor(readonly id: string) {
    super(`sandbox ${id} not found`);
    this.name = 'SandboxNotFoundError';
  }
}

/** Ids become file names and appear in kernel object names: keep them short and plain. */
export const SANDBOX_ID_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,62}$/i;

export function checkSandboxId(id: string): void {
  if (!SANDBOX_ID_PATTERN.test(id) || id.includes('..'))
    throw new Error(`invalid sandbox id: ${JSON.stringify(id)}`);
}

/** Stable hash of a spec (key order does not matter); envs are hashed, never stored. */
export function specHash(spec: SandboxSpec): string {
  return createHash('sha256')
    .update(canonicalJson({ ...spec, egress: undefined, owner: undefined }))
    .digest('hex')
    .slice(0, 32);
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}
