// Sandboxes started ahead of time with a base spec, so that creating one is an assignment (limits
// rewritten, env file written, directories renamed: a few ms) instead of a start (~40-100 ms, most
// of it Node's own start). Requires a daemon that merges BERTH_SANDBOX_ENV_FILE into the env of
// every process it starts, because the spec's envs arrive after the daemon is running; opt-in for
// that reason (LinuxDriverOptions.warmPoolSize). A spec's volumes are mounted into the warm sandbox
// after it is taken (linux-driver.ts mountVolumes); an image from the store has pools of its own.
import { BackgroundFill } from './background-fill.js';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { BACKGROUND_CPU_SHARES, type SandboxSpec } from '../driver.js';
import type { StoredImage } from '../images/image-store.js';
import { type HostContext, startSandbox, teardownSandbox } from './create.js';
import { layerSizeMb } from './disk.js';
import { LAYERS_DIR, type SandboxPaths, sandboxPaths } from './host.js';
import { canConnect, pingHealth } from './launch.js';
import { setAllowedRanges, setupNamespace, slotNet } from './network.js';
import { isProcessAlive, processStartTime, readRecord, type SandboxRecord, writeRecord } from './state.js';

/**
 * Limits a warm sandbox waits with; assignment rewrites them to the real spec. Its writable layer's cap is the pool's
 * disk size instead (WarmPool.diskMb), so that a create of that size needs no remount.
 */
export const WARM_SPEC: SandboxSpec = {
  memoryMb: 512,
  pidsMax: 256,
  // The lowest weight: a sandbox waiting in the pool never takes CPU from one in use (assignment resets it).
  cpuShares: BACKGROUND_CPU_SHARES,
  diskMb: 512,
  envs: {},
  image: '',
  volumes: [],
};

/** Warm sandboxes started at once by a refill (see refill). */
export const MAX_PARALLEL_STARTS = 4;

export interface WarmSandbox {
  dir: string;
  paths: SandboxPaths;
  rec: SandboxRecord;
}

export class WarmPool {
  private readonly ready: WarmSandbox[] = [];
  private readonly fill = new BackgroundFill();
  private seq = 0;
  private closed = false;
  /** How many starts the current refill runs at once (refill). */
  private parallel = MAX_PARALLEL_STARTS;
  /** How many to keep ready now: `size` at rest, more while creates come fast (pool-demand.ts). */
  private target: number;
  /**
   * The cap of the layers the pool mounts: the default sandbox's disk size at first, then the size the latest create
   * asked for. A tmpfs's size is only a cap (its pages are what costs), so waiting at a sandbox's size costs nothing,
   * and a create of that size then keeps the layer as it is instead of remounting it (disk.ts resizeWritableLayer).
   */
  private diskMb: number;
  private readonly dir: string;
  private readonly tag: string;
  /** Why the last refill failed, for diagnostics (a failed refill only leaves the pool smaller). */
  get lastError(): Error | undefined {
    return this.fill.lastError;
  }

  /**
   * `imageKey` and `image` make a pool of sandboxes on that image from the store (`<dataDir>/warm-img/<key>`);
   * without them, the default image's pool (`<dataDir>/warm`).
   */
  constructor(
    private readonly ctx: HostContext,
    readonly size: number,
    private readonly imageKey?: string,
    private readonly image?: StoredImage,
    diskMb: number = WARM_SPEC.diskMb,
  ) {
    this.target = size;
    this.diskMb = diskMb;
    this.dir = imageKey ? join(ctx.dataDir, 'warm-img', imageKey) : join(ctx.dataDir, 'warm');
    this.tag = `${process.pid}.${processStartTime(process.pid) ?? 0}`;
  }

  private paths(name: string): SandboxPaths {
    return sandboxPaths(
      this.ctx.dataDir,
      this.imageKey ? `warm-img/${this.imageKey}/${name}` : `warm/${name}`,
    );
  }

  /** Takes over the warm sandboxes of a driver process that no longer runs; removes dead ones. */
  async sweep(): Promise<void> {
    if (!existsSync(this.dir)) return;
    for (const n of readdirSync(this.dir)) {
      const [pid, start] = n.split('.').map(Number);
      if (isProcessAlive(pid, start)) continue; // another live driver's pool
      const w = { dir: join(this.dir, n), paths: this.paths(n) };
      const rec = readRecord(w.dir);
      // Only a sandbox whose start had finished: one killed with its server mid-way has no API socket yet.
      if (
        rec &&
        isProcessAlive(rec.pid, rec.pidStart) &&
        this.ready.length < this.target &&
        (await canConnect(w.paths.socketPath))
      ) {
        await setAllowedRanges(rec.address, this.ctx.allowCidrs); // this run's setting, not the dead one's
        await setupNamespace(slotNet(rec.slot, rec.name)); // one started by an older server may lack some of it
        if (rec.socketPending) {
          // Killed after its daemon listened but before its record said so: the socket answered just now. Left
          // pending, the sandbox a create makes of it would read as a start cut short, and its controller would
          // start it again, fresh, under the requests it had begun to serve.
          rec.socketPending = undefined;
          writeRecord(w.dir, rec);
        }
        this.ready.push({ ...w, rec });
      } else await teardownSandbox(this.ctx, w.dir, w.paths);
    }
  }

  /**
   * A running warm sandbox, removed from the pool, or undefined: one whose layer has the cap `diskMb` if there is one
   * (the kernel's figure, not what the pool meant to mount), else the oldest. The pool's next starts take that size.
   */
  take(diskMb: number = this.diskMb): WarmSandbox | undefined {
    this.diskMb = Math.floor(diskMb);
    const i = this.ready.findIndex((w) => layerSizeMb(join(LAYERS_DIR, w.rec.name)) === this.diskMb);
    if (i > 0) this.ready.unshift(...this.ready.splice(i, 1));
    for (let w = this.ready.shift(); w; w = this.ready.shift()) {
      const rec = readRecord(w.dir);
      if (rec && isProcessAlive(rec.pid, rec.pidStart)) return { ...w, rec };
      void teardownSandbox(this.ctx, w.dir, w.paths).catch(() => undefined);
    }
    return undefined;
  }

  /** The cap the pool's next starts mount their layers at. */
  get layerMb(): number {
    return this.diskMb;
  }

  /** Sets how many to keep ready; those past it are torn down now, missing ones are started by `refill`. */
  setTarget(n: number): void {
    this.target = n;
    while (this.ready.length > n) {
      const w = this.ready.pop()!;
      void teardownSandbox(this.ctx, w.dir, w.paths).catch(() => undefined);
    }
  }

  /**
   * Starts missing warm sandboxes in the background, at most `parallel` at once (each started one calls this again
   * at the same pace, until a call sets another): a pool grown to 20 that started all its replacements together held
   * two cores for seconds, and a create arriving meanwhile waited behind them. A failure only leaves the pool smaller.
   */
  refill(parallel: number = MAX_PARALLEL_STARTS): void {
    if (this.closed) return;
    this.parallel = parallel;
    const missing = this.target - this.ready.length - this.fill.inflight;
    const room = this.parallel - this.fill.inflight;
    this.fill.start(
      Math.min(missing, room),
      () => this.startOne(),
      () => this.refill(this.parallel),
    );
  }

  /** Warm sandboxes being started now (tests look at a burst's refills). */
  get startingCount(): number {
    return this.fill.inflight;
  }

  private async startOne(): Promise<void> {
    const name = `${this.tag}.${this.seq++}`;
    const dir = join(this.dir, name);
    const paths = this.paths(name);
    try {
      const spec = { ...WARM_SPEC, diskMb: this.diskMb, ...(this.image ? { image: this.image.id } : {}) };
      const rec = await startSandbox(this.ctx, {
        dir,
        id: `warm.${name}`,
        paths,
        spec,
        hash: '',
        image: this.image,
        warm: true,
      });
      await pingHealth(rec.socketPath);
      if (this.closed) await teardownSandbox(this.ctx, dir, paths);
      else this.ready.push({ dir, paths, rec });
    } catch (e) {
      await teardownSandbox(this.ctx, dir, paths).catch(() => undefined);
      throw e;
    }
  }

  get readyCount(): number {
    return this.ready.length;
  }

  /** The records of the sandboxes waiting in the pool (tests look at their cgroups). */
  readyRecords(): SandboxRecord[] {
    return this.ready.map((w) => w.rec);
  }

  async whenIdle(): Promise<void> {
    await this.fill.idle();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.fill.idle();
    for (let w = this.ready.shift(); w; w = this.ready.shift())
      await teardownSandbox(this.ctx, w.dir, w.paths);
  }
}
