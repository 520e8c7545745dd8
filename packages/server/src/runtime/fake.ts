// An in-memory RuntimeDriver for controller tests that run without root. It keeps the contract's
// observable rules (idempotent ensure by spec hash, freeze/thaw states, remove idempotent) and lets
// a test kill a sandbox to exercise recreation. It starts no processes, so sockets do not answer — unless a test
// gives a `socketDir` and starts a sandbox API daemon at `<socketDir>/<id>.sock` itself.
import {
  checkSandboxId,
  type DriveMount,
  type EgressPolicy,
  type RuntimeCapabilities,
  type RuntimeDriver,
  type SandboxInfo,
  type SandboxSpec,
  type SandboxStats,
  SandboxNotFoundError,
  specHash,
  VolumeMissingError,
  type VolumeRef,
} from './driver.js';

export class FakeDriver implements RuntimeDriver {
  readonly capabilities: RuntimeCapabilities = { freezer: true, deepStandby: false, seccomp: false };
  private readonly boxes = new Map<
    string,
    SandboxInfo & { spec: SandboxSpec; cpuSeconds: number; stats?: Partial<SandboxStats>; log?: string }
  >();
  private nextPid = 1000;
  /** Number of sandboxes actually created (not re-used) — what idempotency tests count. */
  creations = 0;

  constructor(
    private readonly now: () => Date = () => new Date(),
    private readonly opts: {
      socketDir?: string;
      /** The sandbox's private address (default a made-up 10.200.0.x): a loopback one lets a test serve its ports. */
      address?: (id: string) => string;
    } = {},
  ) {}

  socketPath(id: string): string {
    checkSandboxId(id);
    return `${this.opts.socketDir ?? '/nonexistent/berth-fake'}/${id}.sock`;
  }

  async ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo> {
    checkSandboxId(id);
    const hash = specHash(spec);
    const cur = this.boxes.get(id);
    if (cur && cur.specHash === hash && cur.state !== 'dead') return strip(cur);
    this.creations++;
    const box = {
      id,
      state: 'running' as const,
      pid: this.nextPid++,
      hostUid: 1_000_000_000 + this.boxes.size,
      address: this.opts.address?.(id) ?? `10.200.0.${(this.boxes.size * 4 + 2) % 256}`,
      socketPath: this.socketPath(id),
      specHash: hash,
      image: spec.image,
      createdAt: this.now().toISOString(),
      ...(spec.owner ? { owner: spec.owner } : {}),
      spec,
      cpuSeconds: 0,
    };
    this.boxes.set(id, box);
    return strip(box);
  }

  async inspect(id: string): Promise<SandboxInfo | undefined> {
    const b = this.boxes.get(id);
    return b ? strip(b) : undefined;
  }

  async list(): Promise<SandboxInfo[]> {
    return [...this.boxes.values()].map(strip);
  }

  private get(id: string) {
    const b = this.boxes.get(id);
    if (!b) throw new SandboxNotFoundError(id);
    if (b.state === 'dead') throw new Error(`sandbox ${id} is not running`);
    return b;
  }

  async freeze(id: string, signal?: AbortSignal): Promise<void> {
    const b = this.get(id);
    if (!signal?.aborted) b.state = 'frozen';
  }

  async thaw(id: string): Promise<void> {
    this.get(id).state = 'running';
  }

  async remove(id: string): Promise<void> {
    this.boxes.delete(id);
    this.liveDrives.delete(id);
  }

  async setEnvs(id: string, envs: Record<string, string>): Promise<void> {
    const b = this.boxes.get(id);
    if (!b) throw new SandboxNotFoundError(id);
    b.spec = { ...b.spec, envs };
  }

  async setEgress(id: string, policy: EgressPolicy | undefined): Promise<void> {
    const b = this.boxes.get(id);
    if (!b) throw new SandboxNotFoundError(id);
    b.spec = { ...b.spec, egress: policy };
  }

  async stats(id: string): Promise<SandboxStats | undefined> {
    const b = this.boxes.get(id);
    if (!b || b.state === 'dead') return undefined;
    const limit = b.spec.memoryMb * 1024 * 1024;
    return {
      memoryBytes: 8 * 1024 * 1024,
      memoryLimitBytes: limit,
      memoryPeakBytes: 8 * 1024 * 1024,
      oomKills: 0,
      pids: 3,
      pidsMax: b.spec.pidsMax,
      cpuSeconds: b.cpuSeconds,
      disk: { usedBytes: 4096, limitBytes: b.spec.diskMb * 1024 * 1024 },
      ...b.stats,
    };
  }

  async daemonLog(id: string, maxBytes = 4096): Promise<string | undefined> {
    return this.boxes.get(id)?.log?.slice(-maxBytes);
  }

  /** Test hook: what stats() reports for the sandbox from now on (its memory, disk, OOM kills), over the defaults. */
  setStats(id: string, stats: Partial<SandboxStats>): void {
    const b = this.boxes.get(id);
    if (b) b.stats = { ...b.stats, ...stats };
  }

  /** Test hook: the sandbox's daemon wrote `text` (daemonLog reads it). */
  writeLog(id: string, text: string): void {
    const b = this.boxes.get(id);
    if (b) b.log = (b.log ?? '') + text;
  }

  /** Test hook: the sandbox's processes use `seconds` more CPU time. */
  burnCpu(id: string, seconds: number): void {
    const b = this.boxes.get(id);
    if (b) b.cpuSeconds += seconds;
  }

  /** Test hook: the sandbox's processes die (as after a crash or a host reboot). */
  kill(id: string): void {
    const b = this.boxes.get(id);
    if (b) b.state = 'dead';
  }

  /** Test hook: the sandbox runs out of memory, its files holding `diskUsedBytes` of it; every process dies. */
  oomKill(id: string, diskUsedBytes: number): void {
    const b = this.boxes.get(id);
    if (!b) return;
    b.state = 'dead';
    b.ended = { oomKills: 2, memoryLimitBytes: b.spec.memoryMb * 1024 * 1024, diskUsedBytes };
  }

  /** Volumes that exist, by `<workspace>/<name>`, with their size and the seed they were made from. */
  readonly volumes = new Map<string, { sizeMb: number; seed?: string }>();
  /** Test hook: the next ensureVolume of this `<workspace>/<name>` fails with this message. */
  readonly volumeFailures = new Map<string, string>();

  async ensureVolume(ref: VolumeRef, sizeMb: number, seed?: string, create = true): Promise<string> {
    const key = `${ref.workspace}/${ref.name}`;
    const failure = this.volumeFailures.get(key);
    if (failure) throw new Error(failure);
    if (!create && !this.volumes.has(key)) throw new VolumeMissingError(ref);
    if (!this.volumes.has(key)) this.volumes.set(key, { sizeMb, ...(seed ? { seed } : {}) });
    return `/nonexistent/berth-fake-volumes/${key}`;
  }

  async volumesHere(): Promise<VolumeRef[]> {
    return [...this.volumes.keys()].map((k) => {
      const [workspace, name] = k.split('/');
      return { workspace, name };
    });
  }

  async removeVolume(ref: VolumeRef): Promise<void> {
    this.volumes.delete(`${ref.workspace}/${ref.name}`);
  }

  /** Drives attached live, by sandbox id and mount path. */
  readonly liveDrives = new Map<string, Map<string, DriveMount>>();

  async mountDrive(id: string, m: DriveMount): Promise<string> {
    if (this.boxes.get(id)?.state !== 'running') throw new SandboxNotFoundError(id);
    const mounts = this.liveDrives.get(id) ?? new Map<string, DriveMount>();
    mounts.set(m.mountPath, m);
    this.liveDrives.set(id, mounts);
    return m.mountPath;
  }

  async unmountDrive(id: string, mountPath: string): Promise<void> {
    this.liveDrives.get(id)?.delete(mountPath);
  }

  async driveMounts(id: string): Promise<DriveMount[]> {
    if (this.boxes.get(id)?.state !== 'running') throw new SandboxNotFoundError(id);
    return [...(this.liveDrives.get(id)?.values() ?? [])];
  }

  /** No root to read back: the fake runs nothing. */
  async exportChanges(id: string): Promise<void> {
    if (!this.boxes.has(id)) throw new SandboxNotFoundError(id);
    throw new Error('the fake driver keeps no files: exportChanges needs the Linux driver');
  }

  /** No files to capture: the fake runs nothing. */
  async captureChanges(id: string): Promise<{ pausedMs: number }> {
    if (!this.boxes.has(id)) throw new SandboxNotFoundError(id);
    throw new Error('the fake driver keeps no files: captureChanges needs the Linux driver');
  }

  async close(): Promise<void> {}
}

function strip(
  b: SandboxInfo & { spec: SandboxSpec; cpuSeconds: number; stats?: unknown; log?: string },
): SandboxInfo {
  const { spec: _spec, cpuSeconds: _cpu, stats: _stats, log: _log, ...info } = b;
  return { ...info };
}
