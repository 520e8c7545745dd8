// What a run leaves on the host, by the slots its data dir claimed (runtime/linux/slots.ts: a slot names a
// sandbox's cgroup, network namespace, address and host uid): seen while it runs, and, once everything was
// removed, none of their kernel objects may remain, nor a mount or a claim under the data dir.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { DEFAULT_UID_BASE } from '../../src/runtime/linux/linux-driver.js';
import { readMountInfo } from '../../src/runtime/linux/mountinfo.js';
import { slotName } from '../../src/runtime/linux/net-pool.js';
import { slotNet } from '../../src/runtime/linux/network.js';
import { claimedSlots } from '../../src/runtime/linux/slots.js';

const CGROUP_DIRS = ['memory', 'pids', 'cpu', 'freezer', 'unified'].map((c) => `/sys/fs/cgroup/${c}/berth`);

export class HostTracker {
  readonly slots = new Set<number>();
  private timer?: NodeJS.Timeout;

  constructor(private readonly dataDir: string) {}

  /** Records the slots the data dir holds now (sandboxes, warm ones, pooled networks). */
  sample(): void {
    for (const c of claimedSlots()) if (c.owner.startsWith(`${this.dataDir}/`)) this.slots.add(c.slot);
  }

  start(everyMs = 500): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.sample();
  }

  /**
   * The leftovers once what was just killed had its moment to go: a process ended with SIGKILL is listed (without
   * a command line) until its parent reaps it, so only what remains after a few seconds counts.
   */
  async leftoversSettled(ms = 5000): Promise<string[]> {
    const end = Date.now() + ms;
    for (;;) {
      const out = this.leftovers();
      if (!out.length || Date.now() > end) return out;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Everything of the run still on the host (call once the server stopped and its sandboxes were removed). */
  leftovers(): string[] {
    const out: string[] = [];
    const claims = claimedSlots();
    for (const c of claims)
      if (c.owner.startsWith(`${this.dataDir}/`)) out.push(`slot ${c.slot} still claimed by ${c.owner}`);
    for (const m of readMountInfo())
      if (m.mountPoint.startsWith(`${this.dataDir}/`)) out.push(`mount ${m.mountPoint}`);
    // A slot another data dir claimed since is that one's now: only slots left free are looked at.
    const taken = new Set(claims.map((c) => c.slot));
    const free = [...this.slots].filter((s) => !taken.has(s));
    let ruleset = '';
    try {
      ruleset = execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' });
    } catch {}
    const uids = new Map(free.map((s) => [DEFAULT_UID_BASE + s, s]));
    for (const s of free) {
      const name = slotName(s);
      for (const d of CGROUP_DIRS) if (existsSync(`${d}/${name}`)) out.push(`cgroup ${d}/${name}`);
      const net = slotNet(s, name);
      if (existsSync(net.netnsPath)) out.push(`network namespace ${net.netns}`);
      if (new RegExp(`\\b${net.address.replaceAll('.', '\\.')}\\b`).test(ruleset))
        out.push(`nftables element ${net.address} (slot ${s})`);
      const layer = `/run/berth/sbx/${name}`;
      if (readMountInfo().some((m) => m.mountPoint === layer || m.mountPoint.startsWith(`${layer}/`)))
        out.push(`mount ${layer}`);
    }
    const inSlots: [number, string][] = [];
    for (const p of readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue;
      try {
        const uid = statSync(`/proc/${p}`).uid;
        // A zombie has ended and holds nothing but its pid until its parent reaps it (slow under load).
        if (zombie(p)) continue;
        const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        const slot = uids.get(uid);
        if (slot !== undefined)
          inSlots.push([slot, `process ${p} of slot ${slot}: ${cmd.replaceAll('\0', ' ')}`]);
        else if (cmd.includes(this.dataDir)) out.push(`process ${p}: ${cmd.replaceAll('\0', ' ')}`);
      } catch {
        // ended meanwhile
      }
    }
    // Test files run side by side: a slot another data dir claimed while /proc was read is that one's sandbox.
    const claimedSince = new Set(claimedSlots().map((c) => c.slot));
    for (const [slot, what] of inSlots) if (!claimedSince.has(slot)) out.push(what);
    return out;
  }
}

/** Whether the process has ended and waits to be reaped (state Z in /proc/<pid>/stat, after its command's parens). */
function zombie(pid: string): boolean {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
}
