// The sandbox runtime, opened on first use. Opening it prepares the host (tools, cgroups, the nftables table,
// a base /etc copied into the data dir) and costs up to seconds, so a server that never runs a sandbox never
// pays it; a server with sandboxes opens it at start, when it adopts them. A host that cannot run sandboxes
// (not root, no bubblewrap) serves everything else, and each sandbox is FAILED with the reason.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type {
  EgressPolicy,
  RuntimeCapabilities,
  RuntimeDriver,
  SandboxInfo,
  SandboxSpec,
  SandboxStats,
  VolumeRef,
  DriveMount,
} from './driver.js';
import { createLinuxDriver } from './index.js';

/** What is assumed before the runtime is open; nothing reads it then (no sandbox exists yet). */
const UNOPENED: RuntimeCapabilities = {
  freezer: false,
  reason: 'the sandbox runtime is not open yet',
  deepStandby: false,
  seccomp: false,
};

export class LazyRuntime implements RuntimeDriver {
  private driver?: RuntimeDriver;
  private opening?: Promise<RuntimeDriver>;

  constructor(
    private readonly dataDir: string,
    private readonly logger: Logger,
    private readonly open: (dataDir: string) => Promise<RuntimeDriver> = (d) =>
      createLinuxDriver({ dataDir: d }),
  ) {}

  get capabilities(): RuntimeCapabilities {
    return this.driver?.capabilities ?? UNOPENED;
  }

  /** The runtime, opened once; a failure is remembered and reported by every call. */
  ready(): Promise<RuntimeDriver> {
    this.opening ??= this.open(this.dataDir).then(
      (d) => {
        this.driver = d;
        const c = d.capabilities;
        if (!c.freezer)
          this.logger.warn(
            { reason: c.reason },
            'sandbox standby is off: this host has no usable cgroup freezer',
          );
        if (!c.deepStandby)
          this.logger.warn(
            { reason: c.deepStandbyReason },
            'sandbox deep standby is off: sandboxes in standby keep their memory',
          );
        if (c.deepStandbyDaemonReason)
          this.logger.warn(
            { reason: c.deepStandbyDaemonReason },
            'BERTH_DEEP_STANDBY_DAEMON=resident is not possible here: deep standby pushes the API daemon out too',
          );
        this.logger.debug(
          { freezer: c.freezer, seccomp: c.seccomp, deepStandby: c.deepStandby },
          'sandbox runtime open',
        );
        return d;
      },
      (err) => {
        this.logger.warn(
          { err: (err as Error).message },
          'sandboxes are unavailable on this host: the sandbox runtime could not start',
        );
        throw new Error(`sandboxes are unavailable on this host: ${(err as Error).message}`);
      },
    );
    return this.opening;
  }

  /** Whether the runtime's data dir holds any sandbox; when not, reads need not open the runtime. */
  private holdsNone(): boolean {
    if (this.driver) return false;
    const dir = join(this.dataDir, 'sandboxes');
    return !existsSync(dir) || readdirSync(dir).length === 0;
  }

  async ensure(id: string, spec: SandboxSpec): Promise<SandboxInfo> {
    return (await this.ready()).ensure(id, spec);
  }
  async inspect(id: string): Promise<SandboxInfo | undefined> {
    if (this.holdsNone()) return undefined;
    return (this.driver ?? (await this.ready())).inspect(id);
  }
  async list(): Promise<SandboxInfo[]> {
    if (this.holdsNone()) return [];
    return (await this.ready()).list();
  }
  async freeze(id: string): Promise<void> {
    return (await this.ready()).freeze(id);
  }
  thaw(id: string): Promise<void> {
    // The hot path of a wake-up: no extra await once the runtime is open.
    return this.driver ? this.driver.thaw(id) : this.ready().then((d) => d.thaw(id));
  }
  async remove(id: string): Promise<void> {
    if (this.holdsNone()) return;
    return (await this.ready()).remove(id);
  }
  warm(): Record<string, number> {
    return this.driver?.warm?.() ?? {};
  }

  socketPath(id: string): string {
    if (!this.driver) throw new Error('the sandbox runtime is not open');
    return this.driver.socketPath(id);
  }
  async setEnvs(id: string, envs: Record<string, string>): Promise<void> {
    return (await this.ready()).setEnvs(id, envs);
  }
  async setEgress(id: string, policy: EgressPolicy | undefined): Promise<void> {
    return (await this.ready()).setEgress(id, policy);
  }
  async stats(id: string): Promise<SandboxStats | undefined> {
    if (this.holdsNone()) return undefined;
    return (await this.ready()).stats(id);
  }
  async daemonLog(id: string, maxBytes?: number): Promise<string | undefined> {
    if (this.holdsNone()) return undefined;
    return (await this.ready()).daemonLog(id, maxBytes);
  }
  async volumesHere(): Promise<VolumeRef[]> {
    return (await this.ready()).volumesHere();
  }

  async ensureVolume(ref: VolumeRef, sizeMb: number, seed?: string, create?: boolean): Promise<string> {
    return (await this.ready()).ensureVolume(ref, sizeMb, seed, create);
  }
  async removeVolume(ref: VolumeRef): Promise<void> {
    return (await this.ready()).removeVolume(ref);
  }
  async mountDrive(id: string, m: DriveMount): Promise<string> {
    return (await this.ready()).mountDrive(id, m);
  }
  async unmountDrive(id: string, mountPath: string): Promise<void> {
    return (await this.ready()).unmountDrive(id, mountPath);
  }
  async driveMounts(id: string): Promise<DriveMount[]> {
    return (await this.ready()).driveMounts(id);
  }
  async exportChanges(id: string, dest: string): Promise<void> {
    return (await this.ready()).exportChanges(id, dest);
  }
  async captureChanges(id: string, dest: string): Promise<{ pausedMs: number }> {
    return (await this.ready()).captureChanges(id, dest);
  }
  async close(): Promise<void> {
    await this.driver?.close();
  }
}
