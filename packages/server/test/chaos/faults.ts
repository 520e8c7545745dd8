// The faults of a chaos run, one at a time at random moments: `berth serve` killed with SIGKILL (and started again
// at once), a sandbox's API daemon killed, a replica or a job task killed whole, the egress proxy killed, a
// sandbox's disk (its writable layer, held in memory) filled, a sandbox's memory exhausted by a process. Each is
// recorded with its target and time, so the checks can look for the event that explains it.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { exec, type LoadContext, sandboxSpec } from './load.js';

export type FaultKind = 'server' | 'daemon' | 'replica' | 'task' | 'proxy' | 'fill-disk' | 'fill-memory';

export interface Fault {
  kind: FaultKind;
  at: string;
  /** The object whose events should explain it (kind/name), when there is one. */
  target?: { kind: 'Sandbox' | 'Agent'; name: string };
  /** The runtime instance hit. */
  instance?: string;
  /** Nothing to hit at that moment (no replica running, say): not counted as injected. */
  skipped?: boolean;
}

/** Pids of a runtime instance's processes, from its cgroup. */
function pidsOf(dataDir: string, id: string): number[] {
  try {
    const rec = JSON.parse(readFileSync(join(dataDir, 'sandboxes', id, 'state.json'), 'utf8'));
    return readFileSync(`/sys/fs/cgroup/pids/berth/${rec.name}/cgroup.procs`, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};

const kill = (pid: number) => {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {}
};

const instances = (dataDir: string, prefix: string) => {
  const dir = join(dataDir, 'sandboxes');
  return (existsSync(dir) ? readdirSync(dir) : []).filter(
    (id) => id.startsWith(prefix) && pidsOf(dataDir, id).length > 0,
  );
};
/** Sandboxes a daemon kill may hit: those whose loop starts anew on a fresh sandbox. */
const DAEMON_TARGETS = ['chaos-vol-box', 'chaos-mcp', 'chaos-web'];

export class FaultInjector {
  readonly injected: Fault[] = [];
  private fills = 0;
  /** The kinds still to come in this round: every kind once, in a seeded order, before any repeats. */
  private deck: FaultKind[] = [];

  constructor(
    private readonly ctx: LoadContext,
    private readonly kinds: FaultKind[],
  ) {}

  private pick<T>(xs: T[]): T | undefined {
    return xs[Math.floor(this.ctx.rng() * xs.length)];
  }

  /** The next kind: a short run still meets each kind once, a long one meets them all evenly. */
  private next(): FaultKind {
    if (!this.deck.length) {
      this.deck = [...this.kinds];
      for (let i = this.deck.length - 1; i > 0; i--) {
        const j = Math.floor(this.ctx.rng() * (i + 1));
        [this.deck[i], this.deck[j]] = [this.deck[j], this.deck[i]];
      }
    }
    return this.deck.pop()!;
  }

  async one(kind: FaultKind = this.next()): Promise<Fault> {
    const { s } = this.ctx;
    const f: Fault = { kind, at: new Date().toISOString() };
    switch (kind) {
      case 'server':
        await s.kill();
        break;
      case 'daemon': {
        const name = this.pick(DAEMON_TARGETS.filter((n) => instances(s.dataDir, `default.${n}`).length));
        const daemon =
          name && pidsOf(s.dataDir, `default.${name}`).find((p) => cmdline(p).includes('daemon.cjs'));
        if (!name || !daemon) f.skipped = true;
        else {
          kill(daemon);
          Object.assign(f, { target: { kind: 'Sandbox', name }, instance: `default.${name}` });
        }
        break;
      }
      case 'replica':
      case 'task': {
        const id = this.pick(instances(s.dataDir, kind === 'replica' ? 'wl-' : 'job-'));
        if (!id) f.skipped = true;
        else {
          for (const p of pidsOf(s.dataDir, id)) kill(p);
          f.instance = id;
          if (kind === 'replica') f.target = { kind: 'Agent', name: 'chaos-agent' };
        }
        break;
      }
      case 'proxy': {
        const proxy = readdirSync('/proc')
          .filter((p) => /^\d+$/.test(p))
          .map(Number)
          .find((p) => {
            try {
              const ppid = Number(readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
              return ppid === s.pid && cmdline(p).includes('egress/child');
            } catch {
              return false;
            }
          });
        if (!proxy) f.skipped = true;
        else {
          kill(proxy);
          f.target = { kind: 'Sandbox', name: 'chaos-web' };
        }
        break;
      }
      case 'fill-disk': {
        // Its files are held in memory: filled past its size, the sandbox runs out of memory and says so (FAILED).
        const name = `chaos-fill-${++this.fills}`;
        const c = await s.call('POST', '/v0/sandboxes', { metadata: { name }, spec: sandboxSpec() });
        if (c.status !== 200) f.skipped = true;
        else {
          await exec(this.ctx, name, 'dd if=/dev/zero of=/tmp/fill bs=1M count=400');
          f.target = { kind: 'Sandbox', name };
        }
        break;
      }
      case 'fill-memory': {
        const name = 'chaos-eater';
        await s.call('POST', '/v0/sandboxes', { metadata: { name }, spec: sandboxSpec() });
        const e = await exec(this.ctx, name, 'node -e "const a=[];for(;;)a.push(Buffer.alloc(1e7,1))"');
        if (e.status !== 200) f.skipped = true;
        else f.target = { kind: 'Sandbox', name };
        break;
      }
    }
    this.injected.push(f);
    return f;
  }
}

/** What an event that explains a fault of this kind says. */
export const EXPLAINED_BY: Record<FaultKind, RegExp | undefined> = {
  server: undefined,
  daemon: /^the sandbox had stopped: its API daemon ended/,
  replica: /^replica \S+ crashed: /,
  task: undefined,
  proxy: /^egress proxy (down|back)/,
  // Its files are held in memory, capped at its memory: the layer fills (writes fail), or the memory runs out.
  'fill-disk': /^(disk full: the sandbox's files fill its \d+ MB|out of memory: )/,
  'fill-memory': /^out of memory: the kernel ended (a process|\d+ processes) in the sandbox/,
};
