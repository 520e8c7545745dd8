// Deep standby (decision 058): a sandbox frozen for `afterMs` has its memory pushed out to swap while it stays
// frozen. Its processes, files, sockets and address stay; a wake is the same thaw as any standby's, and pages come
// back on demand as the processes touch them. Measured on cgroup v1 (kernel 6.18): `memory.force_empty` on a
// populated, frozen group reclaims its anonymous and file pages (28 MB in 60 ms) and leaves its kernel memory
// (page tables, kernel stacks, slab: ~0.6 MB for a Node process); without swap only page cache can go, so without
// swap deep standby is reported unavailable rather than pretended. Nothing is changed on the group, so a wake
// restores nothing: the freezer stops the processes from faulting pages back until the thaw.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SandboxCgroup, CgroupHost } from './cgroup.js';
import type { DeepStandbyEvent } from '../driver.js';
import { run } from './exec.js';
import { canPageOut, daemonPid, pageOut } from './page-out.js';

export type { DeepStandbyEvent };

export interface SwapState {
  available: boolean;
  /** Why deep standby is off, when it is. */
  reason?: string;
  /** The swap file Berth switched on, when it did (else the host's own swap is used). */
  swapFile?: string;
  /** Swap space the host has in all (bytes). */
  totalBytes?: number;
}

export interface SwapOptions {
  /** Where Berth's swap file lives (default `<dataDir>/swap/berth.swap`). */
  file: string;
  /** Its size; 0: never make one (the host's swap, if any, is used). */
  sizeMb: number;
}

/** Active swap areas of the host: path → size in bytes (/proc/swaps lists KiB). */
export function activeSwaps(): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of readFileSync('/proc/swaps', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 3) out.set(f[0], Number(f[2]) * 1024);
  }
  return out;
}

const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/**
 * Makes sure swap exists for deep standby: the host's own if it has some, else a swap file of `sizeMb` under the
 * data dir switched on here (made once; a restarted server switches the same file on again). Never throws: what
 * fails becomes the reason deep standby is off.
 */
export async function prepareSwap(
  host: CgroupHost,
  opts: SwapOptions,
  readSwaps: () => Map<string, number> = activeSwaps,
): Promise<SwapState> {
  if (host.layout !== 'hybrid')
    return {
      available: false,
      reason:
        'deep standby uses cgroup v1 memory.force_empty; this host has only cgroup2 (memory.reclaim is not used yet)',
    };
  let swaps = readSwaps();
  if (swaps.has(opts.file)) return { available: true, swapFile: opts.file, totalBytes: total(swaps) };
  if (opts.sizeMb <= 0) {
    if (swaps.size) return { available: true, totalBytes: total(swaps) };
    return {
      available: false,
      reason:
        'the host has no swap and BERTH_SWAP_MB is 0 (set it to the MB of a swap file Berth may make under its data dir): without swap a frozen sandbox keeps its memory',
    };
  }
  try {
    if (!existsSync(opts.file)) {
      mkdirSync(dirname(opts.file), { recursive: true, mode: 0o700 });
      // fallocate is instant; swapon accepts preallocated files on ext4 and xfs (not on a copy-on-write btrfs).
      await run('fallocate', ['-l', `${opts.sizeMb}M`, opts.file]);
      await run('chmod', ['600', opts.file]);
      await run('mkswap', ['-q', opts.file]);
    }
    await run('swapon', [opts.file]);
  } catch (e) {
    swaps = readSwaps();
    if (swaps.size) return { available: true, totalBytes: total(swaps) };
    return {
      available: false,
      reason: `the host has no swap and Berth could not switch on ${opts.file}: ${(e as Error).message.trim()}`,
    };
  }
  return { available: true, swapFile: opts.file, totalBytes: total(readSwaps()) };
}

/**
 * The timers of sandboxes in standby. `schedule` runs at each freeze, `cancel` at each thaw (a Map delete: the
 * wake path costs nothing more). A timer that fires pushes the memory out under the sandbox's serial lock, and only
 * if the group is still frozen then.
 */
export class DeepStandby {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly deep = new Set<string>();
  /** Whether the daemon is kept resident (page-out.ts, where perl is there to make the call); else the whole
   *  group is reclaimed. */
  readonly keepDaemon: boolean;

  constructor(
    readonly afterMs: number,
    private readonly serial: <T>(id: string, fn: () => Promise<T>) => Promise<T>,
    private readonly onDeep?: (e: DeepStandbyEvent) => void,
    keepDaemon = false,
  ) {
    this.keepDaemon = keepDaemon && canPageOut();
  }

  get enabled(): boolean {
    return this.afterMs > 0;
  }

  isDeep(id: string): boolean {
    return this.deep.has(id);
  }

  schedule(id: string, cg: SandboxCgroup): void {
    if (!this.enabled) return;
    this.cancel(id);
    const timer = setTimeout(() => {
      this.timers.delete(id);
      void this.serial(id, () => this.release(id, cg)).catch(() => undefined);
    }, this.afterMs);
    timer.unref();
    this.timers.set(id, timer);
  }

  /** Pushes the memory of a frozen sandbox out now (also what the timer does); false when it is not frozen. */
  async release(id: string, cg: SandboxCgroup): Promise<boolean> {
    if (!cg.isFrozen()) return false;
    const beforeBytes = cg.stats().memoryBytes;
    // With keepDaemon the user's processes go to swap and the API daemon stays (page-out.ts); else, or when the
    // daemon or the helper cannot be found, the whole group goes.
    const pids = cg.pids();
    const daemon = this.keepDaemon ? daemonPid(pids) : undefined;
    let perProcess = false;
    if (daemon !== undefined) {
      perProcess = await pageOut(
        cg.memoryGroup(),
        pids.filter((p) => p !== daemon),
      ).then(
        () => true,
        () => false,
      );
      if (perProcess && cg.isFrozen()) await cg.dropPagedOut();
    }
    if (!perProcess) await cg.reclaim();
    // A thaw that came in during the reclaim has already run: the sandbox is awake, not deep.
    if (!cg.isFrozen()) return false;
    this.deep.add(id);
    this.onDeep?.({ id, beforeBytes, afterBytes: cg.stats().memoryBytes });
    return true;
  }

  cancel(id: string): void {
    const t = this.timers.get(id);
    if (t) {
      clearTimeout(t);
      this.timers.delete(id);
    }
    this.deep.delete(id);
  }

  close(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }
}
