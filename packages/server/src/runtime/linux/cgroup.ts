// Per-sandbox cgroups: limits (memory, pids, cpu), the freezer for standby, and kill-all.
// Berth's groups live in a `berth` directory at the root of each hierarchy, beside (never inside)
// the group of the process running the server, which the machine's own tooling may own.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { mkdir, rmdir, writeFile as writeFileAsync } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout } from 'node:timers/promises';
import { sleep } from './exec.js';

export const CGROUP_ROOT = '/sys/fs/cgroup';
const PARENT = 'berth';
/** Freezing an idle tree takes well under a millisecond; a busy one a little longer. */
const FREEZE_TIMEOUT_MS = 5_000;
/** Processes leave a killed group within milliseconds; give slow exits (large memory) some room. */
const EMPTY_TIMEOUT_MS = 10_000;

export interface CgroupHost {
  /** 'hybrid': v1 controllers + a controller-less cgroup2 (Debian with systemd.unified_cgroup_hierarchy=0);
   *  'unified': pure cgroup2 with the memory, pids and cpu controllers. */
  layout: 'hybrid' | 'unified';
  /** Mount point of cgroup2, if any. */
  unified?: string;
  freezer?: 'cgroup2' | 'cgroup1';
  freezerReason?: string;
  /** cgroup.kill (Linux 5.14+) kills a whole tree race-free; else we signal each task in a loop. */
  killFile: boolean;
}

export interface CgroupLimits {
  memoryMb: number;
  pidsMax: number;
  cpuShares: number;
}

const read = (p: string) => readFileSync(p, 'utf8');
const write = (p: string, v: string) => writeFileSync(p, v);

/** Looks at the mounted hierarchies once at start and probes the freezer on a throwaway group. */
export function detectCgroups(): CgroupHost {
  const v1 = ['memory', 'pids', 'cpu'].every((c) => existsSync(join(CGROUP_ROOT, c, 'tasks')));
  const pureV2 = existsSync(join(CGROUP_ROOT, 'cgroup.controllers'));
  const unified = pureV2
    ? CGROUP_ROOT
    : existsSync(join(CGROUP_ROOT, 'unified', 'cgroup.procs'))
      ? join(CGROUP_ROOT, 'unified')
      : undefined;
  let layout: CgroupHost['layout'];
  if (v1) layout = 'hybrid';
  else if (pureV2 && /\bmemory\b/.test(read(join(CGROUP_ROOT, 'cgroup.controllers')))) layout = 'unified';
  else
    throw new Error(
      'no usable cgroup memory/pids/cpu controllers (need cgroup v1 or cgroup2 with controllers)',
    );
  const host: CgroupHost = { layout, unified, killFile: false };
  if (unified) {
    const probe = join(unified, PARENT, `probe-${process.pid}`);
    try {
      mkdirSync(probe, { recursive: true });
      host.killFile = existsSync(join(probe, 'cgroup.kill'));
      write(join(probe, 'cgroup.freeze'), '1');
      if (/^frozen 1$/m.test(read(join(probe, 'cgroup.events')))) host.freezer = 'cgroup2';
      write(join(probe, 'cgroup.freeze'), '0');
    } catch (e) {
      host.freezerReason = `cgroup2 freezer unusable: ${(e as Error).message}`;
    } finally {
      try {
        rmdirSync(probe);
      } catch {}
    }
  }
  if (!host.freezer && layout === 'hybrid' && existsSync(join(CGROUP_ROOT, 'freezer', 'tasks'))) {
    host.freezer = 'cgroup1';
  }
  if (!host.freezer) host.freezerReason ??= 'neither cgroup2 cgroup.freeze nor the v1 freezer is available';
  if (layout === 'unified') {
    const parent = join(CGROUP_ROOT, PARENT);
    mkdirSync(parent, { recursive: true });
    write(join(parent, 'cgroup.subtree_control'), '+memory +pids +cpu');
  }
  return host;
}

/** The cgroup directories of one sandbox, named by its kernel name (e.g. `sb12`). */
export class SandboxCgroup {
  constructor(
    private readonly host: CgroupHost,
    readonly name: string,
  ) {}

  private v1(controller: string): string {
    return join(CGROUP_ROOT, controller, PARENT, this.name);
  }
  private get v2(): string | undefined {
    return this.host.unified ? join(this.host.unified, PARENT, this.name) : undefined;
  }
  /** Every directory the sandbox's processes must join. */
  dirs(): string[] {
    const out: string[] = [];
    if (this.host.layout === 'hybrid') {
      out.push(this.v1('memory'), this.v1('pids'), this.v1('cpu'));
      if (this.host.freezer === 'cgroup1') out.push(this.v1('freezer'));
    }
    if (this.v2) out.push(this.v2);
    return out;
  }
  /** The files a launcher writes its own pid into before it execs the sandbox. */
  procsFiles(): string[] {
    return this.dirs().map((d) => join(d, 'cgroup.procs'));
  }

  /** Through the thread pool: a v1 `mkdir` allocates the group in each hierarchy and can wait on cgroup locks. */
  async create(limits: CgroupLimits): Promise<void> {
    for (const d of this.dirs()) await mkdir(d, { recursive: true });
    this.setLimits(limits);
  }

  setLimits(limits: CgroupLimits): void {
    const bytes = String(Math.floor(limits.memoryMb * 1024 * 1024));
    if (this.host.layout === 'hybrid') {
      // No swapping around the limit where swap exists (the file is absent without swap accounting). The kernel
      // keeps memsw >= limit at every step: raise memsw first when growing, lower the limit first when shrinking.
      const limit = join(this.v1('memory'), 'memory.limit_in_bytes');
      const memsw = join(this.v1('memory'), 'memory.memsw.limit_in_bytes');
      const hasMemsw = existsSync(memsw);
      const growing = hasMemsw && Number(bytes) > Number(readFileSync(limit, 'utf8'));
      if (growing) write(memsw, bytes);
      write(limit, bytes);
      if (hasMemsw && !growing) write(memsw, bytes);
      write(join(this.v1('pids'), 'pids.max'), String(limits.pidsMax));
      write(join(this.v1('cpu'), 'cpu.shares'), String(limits.cpuShares));
    } else {
      const d = this.v2!;
      write(join(d, 'memory.max'), bytes);
      if (existsSync(join(d, 'memory.swap.max'))) write(join(d, 'memory.swap.max'), '0');
      write(join(d, 'pids.max'), String(limits.pidsMax));
      const weight = Math.min(10000, Math.max(1, 1 + Math.round(((limits.cpuShares - 2) * 9999) / 262142)));
      write(join(d, 'cpu.weight'), String(weight));
    }
  }

  exists(): boolean {
    return this.dirs().every((d) => existsSync(d));
  }

  pids(): number[] {
    const d = this.host.layout === 'hybrid' ? this.v1('pids') : this.v2!;
    try {
      return read(join(d, 'cgroup.procs')).split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  }

  isFrozen(): boolean {
    try {
      if (this.host.freezer === 'cgroup2') return /^frozen 1$/m.test(read(join(this.v2!, 'cgroup.events')));
      if (this.host.freezer === 'cgroup1')
        return read(join(this.v1('freezer'), 'freezer.state')).trim() === 'FROZEN';
    } catch {}
    return false;
  }

  /**
   * Resolves once every task is stopped, so a caller may snapshot or measure afterwards; or, when `signal` aborts
   * first, at once with the group thawed again (a request must not wait for a freeze it is about to undo).
   */
  async freeze(signal?: AbortSignal): Promise<void> {
    if (!this.host.freezer) throw new Error(this.host.freezerReason ?? 'no freezer');
    if (signal?.aborted) return;
    if (this.host.freezer === 'cgroup2') write(join(this.v2!, 'cgroup.freeze'), '1');
    else write(join(this.v1('freezer'), 'freezer.state'), 'FROZEN');
    const deadline = Date.now() + FREEZE_TIMEOUT_MS;
    while (!signal?.aborted && !this.isFrozen()) {
      if (Date.now() > deadline)
        throw new Error(`cgroup ${this.name} did not freeze in ${FREEZE_TIMEOUT_MS} ms`);
      await setTimeout(1, undefined, { signal }).catch(() => undefined);
    }
    if (signal?.aborted) this.thaw();
  }

  /** A single write: the tasks run again immediately (measured 0.13 ms at p50). */
  thaw(): void {
    if (this.host.freezer === 'cgroup2') write(join(this.v2!, 'cgroup.freeze'), '0');
    else if (this.host.freezer === 'cgroup1') write(join(this.v1('freezer'), 'freezer.state'), 'THAWED');
  }

  /**
   * Reclaims what the group's memory holds (deep-standby.ts): v1 `memory.force_empty` on a populated group pushes
   * anonymous pages to swap and drops page cache, leaving only kernel memory. Written through the thread pool: it
   * takes ~2 ms per MB reclaimed, and the event loop must not wait for it.
   */
  async reclaim(): Promise<void> {
    if (this.host.layout !== 'hybrid') throw new Error('reclaim needs the cgroup v1 memory controller');
    // EBUSY when it could not get to zero (kernel memory stays): what could go has gone.
    await writeFileAsync(join(this.v1('memory'), 'memory.force_empty'), '0').catch(() => undefined);
  }

  /**
   * Frees what a per-process page-out (page-out.ts) left in memory. MADV_PAGEOUT writes the pages to swap and
   * unmaps them, but they stay in the swap cache, charged to the group, until a reclaim takes them: the limit is
   * lowered by that much (anonymous pages no process maps, and page cache no process maps) and put back, so the
   * reclaim finds those clean pages first and the mapped ones (the daemon's) stay. It first waits for the swap
   * writes to finish (a page under writeback cannot be freed, and the reclaim would take mapped ones instead).
   */
  async dropPagedOut(): Promise<void> {
    if (this.host.layout !== 'hybrid') throw new Error('reclaim needs the cgroup v1 memory controller');
    const m = this.v1('memory');
    const stat = () => {
      const out = new Map<string, number>();
      for (const line of read(join(m, 'memory.stat')).split('\n')) {
        const [k, v] = line.split(' ');
        if (k && v) out.set(k, Number(v));
      }
      return (k: string) => out.get(k) ?? 0;
    };
    for (let i = 0; i < 300 && stat()('writeback') > 0; i++) await sleep(10);
    const s = stat();
    const unmapped =
      Math.max(0, s('active_anon') + s('inactive_anon') - s('rss') - s('shmem')) +
      Math.max(0, s('active_file') + s('inactive_file') - s('mapped_file'));
    // A wake during the wait above: the processes run again and must not meet a lowered limit.
    if (unmapped <= 0 || !this.isFrozen()) return;
    const limitFile = join(m, 'memory.limit_in_bytes');
    const limit = read(limitFile).trim();
    const target = Number(read(join(m, 'memory.usage_in_bytes')).trim()) - unmapped;
    // From the frozen check to the limit put back, one synchronous step: no thaw (another request on this event
    // loop) can run in between, so the sandbox never runs under the lowered limit (a v1 limit write reclaims or
    // fails with EBUSY; it never calls the OOM killer). EBUSY when the kernel could not get that low: nothing lost.
    try {
      write(limitFile, String(Math.max(target, 1 << 20)));
    } catch {
    } finally {
      write(limitFile, limit);
    }
  }

  /** The group's path in the v1 memory hierarchy, as /proc/<pid>/cgroup names it. */
  memoryGroup(): string {
    return `/${PARENT}/${this.name}`;
  }

  /** SIGKILLs every task (frozen or not) and waits until the group is empty. */
  async kill(): Promise<void> {
    if (!this.exists()) return;
    if (this.host.freezer === 'cgroup1') this.thaw(); // v1-frozen tasks cannot die
    const deadline = Date.now() + EMPTY_TIMEOUT_MS;
    for (;;) {
      const pids = this.pids();
      if (!pids.length) return;
      if (this.host.killFile && this.v2) write(join(this.v2, 'cgroup.kill'), '1');
      else
        for (const pid of pids) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {}
        }
      if (Date.now() > deadline) throw new Error(`cgroup ${this.name} still has tasks ${pids.join(',')}`);
      await sleep(5);
    }
  }

  /**
   * Deletes the directories; the group must be empty (call kill first). Through the thread pool: a v1 `rmdir` can
   * wait in the kernel (decision 078).
   */
  async remove(): Promise<void> {
    for (const d of this.dirs()) {
      for (let attempt = 0; ; attempt++) {
        try {
          await rmdir(d);
          break;
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'ENOENT') break;
          // EBUSY for a moment after the last task exits.
          if (attempt > 200) throw e;
          await sleep(5);
        }
      }
    }
  }

  stats(): {
    memoryBytes: number;
    memoryLimitBytes: number;
    memoryPeakBytes: number;
    oomKills: number;
    pids: number;
    pidsMax: number;
    cpuSeconds?: number;
  } {
    const num = (p: string) => {
      const s = read(p).trim();
      return s === 'max' ? Number.POSITIVE_INFINITY : Number(s);
    };
    const cpuSeconds = this.cpuSeconds();
    if (this.host.layout === 'hybrid') {
      const m = this.v1('memory');
      const oom = /^oom_kill (\d+)$/m.exec(read(join(m, 'memory.oom_control')));
      return {
        memoryBytes: num(join(m, 'memory.usage_in_bytes')),
        memoryLimitBytes: num(join(m, 'memory.limit_in_bytes')),
        memoryPeakBytes: num(join(m, 'memory.max_usage_in_bytes')),
        oomKills: oom ? Number(oom[1]) : 0,
        pids: num(join(this.v1('pids'), 'pids.current')),
        pidsMax: num(join(this.v1('pids'), 'pids.max')),
        ...(cpuSeconds === undefined ? {} : { cpuSeconds }),
      };
    }
    const d = this.v2!;
    const oom = /^oom_kill (\d+)$/m.exec(read(join(d, 'memory.events')));
    const peak = join(d, 'memory.peak');
    return {
      memoryBytes: num(join(d, 'memory.current')),
      memoryLimitBytes: num(join(d, 'memory.max')),
      memoryPeakBytes: existsSync(peak) ? num(peak) : num(join(d, 'memory.current')),
      oomKills: oom ? Number(oom[1]) : 0,
      pids: num(join(d, 'pids.current')),
      pidsMax: num(join(d, 'pids.max')),
      ...(cpuSeconds === undefined ? {} : { cpuSeconds }),
    };
  }

  /**
   * CPU time of the group: cgroup2 keeps `usage_usec` in cpu.stat of every group, controllers or not (so the
   * hybrid layout's controller-less unified group has it too); a v1-only host has it where cpuacct is co-mounted.
   */
  private cpuSeconds(): number | undefined {
    const v2 = this.v2 && join(this.v2, 'cpu.stat');
    if (v2 && existsSync(v2)) {
      const m = /^usage_usec (\d+)$/m.exec(read(v2));
      if (m) return Number(m[1]) / 1e6;
    }
    const v1 = join(this.v1('cpu'), 'cpuacct.usage');
    if (this.host.layout === 'hybrid' && existsSync(v1)) return Number(read(v1).trim()) / 1e9;
    return undefined;
  }

  /** Times the pids limit refused a fork (v1 pids.events / v2 pids.events "max"). */
  pidsLimitHits(): number {
    const d = this.host.layout === 'hybrid' ? this.v1('pids') : this.v2!;
    const m = /^max (\d+)$/m.exec(read(join(d, 'pids.events')));
    return m ? Number(m[1]) : 0;
  }
}
