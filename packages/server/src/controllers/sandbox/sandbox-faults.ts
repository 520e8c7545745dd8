// Faults a running sandbox survives, said on it as events in plain words: a process the out-of-memory killer ended
// (the sandbox and its other processes run on; one whose every process was ended is the controller's FAILED, decision
// 041), and a writable layer that is full (writes fail with ENOSPC). A sweep reads the runtime's figures of every
// running sandbox; a sandbox in standby is skipped (a frozen sandbox allocates nothing and writes nothing). A deployed
// sandbox whose daemon ended while no request reached it is handed to its controller, which says so and starts it
// again: without the sweep it stayed dead, unexplained, until the next request.
import type { Logger } from 'pino';
import type { RuntimeDriver, SandboxStats } from '../../runtime/driver.js';
import type { ProxyEvent } from '../../runtime/egress/supervisor.js';
import { sandboxId } from '../../runtime/sandbox-id.js';
import { lastOutput } from '../../sandbox-api/last-output.js';
import type { Resources } from '../../store/resources.js';
import { EVERY_WORKSPACE, keyOf, type ResourceKey } from '../../store/store.js';
import { recordHeld } from '../../cluster/fencing.js';

/**
 * Sweep period: an event a few seconds after the fault, at the cost of reading two cgroup files and one statfs per
 * running sandbox (about 30 µs each) every period.
 */
export const FAULT_SWEEP_MS = 5_000;
/** Full: less than this is left in the writable layer (tmpfs rounds to pages, and a write needs room for its blocks). */
export const DISK_FULL_MARGIN_BYTES = 256 * 1024;
/** A full layer is said again only once it was freed below this share of its cap (no event per sweep at the edge). */
export const DISK_CLEARED_SHARE = 0.9;

export interface FaultDeps {
  resources: Resources;
  driver: RuntimeDriver;
  logger?: Logger;
  sweepMs?: number;
  /** Reconciles the sandbox now (its controller tells the stop and starts it again). */
  wake?: (key: ResourceKey) => void;
}

const mb = (bytes: number) => Math.round(bytes / (1024 * 1024));

/**
 * The event of processes ended by the out-of-memory killer in a sandbox that runs on. It names the total since the
 * sandbox started, so that a second kill with the same figures is a new event (the store keeps one of two identical
 * events in a row).
 */
export function oomKilledMessage(killed: number, s: SandboxStats): string {
  const what = killed === 1 ? 'a process' : `${killed} processes`;
  const files = s.disk ? `, ${mb(s.disk.usedBytes)} MB of it files` : '';
  return (
    `out of memory: the kernel ended ${what} in the sandbox (${s.oomKills} since it started), which had used all of ` +
    `its ${mb(s.memoryLimitBytes)} MB ` +
    `(${mb(s.memoryBytes)} MB in use now${files}: what is written to /home/user, /tmp, /workspace and /var is held ` +
    'in memory). The sandbox and its other processes run on; give it more memory (spec.runtime.memory) or use less'
  );
}

/** The event of a writable layer with no room left. */
export function diskFullMessage(disk: NonNullable<SandboxStats['disk']>): string {
  return (
    `disk full: the sandbox's files fill its ${mb(disk.limitBytes)} MB (/home/user, /tmp, /workspace and /var ` +
    'together); writes fail with "No space left on device" until files are removed. Its cap is its memory ' +
    '(spec.runtime.memory); a volume holds more'
  );
}

interface Seen {
  oomKills: number;
  diskFull: boolean;
}

export class SandboxFaultWatch {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  /**
   * By runtime id and start time (a sandbox started again has new counters): what the last sweep saw. The first
   * sweep of a server takes the counts of the sandboxes it adopts as they are (kills while no server ran are not
   * told); a sandbox first seen after that started at zero.
   */
  private readonly seen = new Map<string, Seen>();
  private primed = false;

  constructor(private readonly deps: FaultDeps) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.sweep()
        .catch((err) =>
          this.deps.logger?.warn({ err }, 'the sandbox fault sweep failed; the next one retries'),
        )
        .finally(() => {
          this.running = undefined;
        });
    }, this.deps.sweepMs ?? FAULT_SWEEP_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One sweep over the running sandboxes; returns the events recorded (workspace/name: message). */
  async sweep(): Promise<string[]> {
    const { resources, driver } = this.deps;
    const all = await driver.list();
    const running = new Map(
      all.filter((i) => i.state === 'running').map((i) => [i.id, `${i.id}@${i.createdAt}`]),
    );
    const dead = new Set(all.filter((i) => i.state === 'dead').map((i) => i.id));
    const out: string[] = [];
    const live = new Set<string>();
    for (const o of await resources.store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' })) {
      const id = sandboxId(o.workspace, o.name);
      if (dead.has(id) && o.body.status === 'DEPLOYED') {
        this.deps.wake?.(keyOf(o));
        continue;
      }
      const instance = running.get(id);
      if (!instance || o.body.status !== 'DEPLOYED') continue;
      live.add(instance);
      const s = await driver.stats(id).catch(() => undefined);
      if (!s) continue;
      const before = this.seen.get(instance) ?? (this.primed ? { oomKills: 0, diskFull: false } : undefined);
      const disk = s.disk;
      const full = disk ? disk.limitBytes - disk.usedBytes < DISK_FULL_MARGIN_BYTES : false;
      const stillFull = !!before?.diskFull && !!disk && disk.usedBytes > disk.limitBytes * DISK_CLEARED_SHARE;
      this.seen.set(instance, { oomKills: s.oomKills, diskFull: full || stillFull });
      const say = async (message: string) => {
        // Refused when the sandbox is placed on another node now (its reconcile removes this instance).
        if (await recordHeld(resources, keyOf(o), message)) out.push(`${o.workspace}/${o.name}: ${message}`);
      };
      if (before && s.oomKills > before.oomKills)
        await say(oomKilledMessage(s.oomKills - before.oomKills, s));
      if (disk && full && !before?.diskFull) await say(diskFullMessage(disk));
    }
    for (const k of this.seen.keys()) if (!live.has(k)) this.seen.delete(k);
    this.primed = true;
    return out;
  }
}

/**
 * The event of a running sandbox found stopped and started again: what the runtime knows of its end (the daemon's
 * last output, processes the out-of-memory killer ended), and what starting again costs.
 */
export async function stoppedMessage(driver: RuntimeDriver, id: string): Promise<string> {
  const info = await driver.inspect(id).catch(() => undefined);
  const fresh =
    'starting it again, fresh: its processes and the files of its writable layer are gone (volumes are kept)';
  if (!info) return `the sandbox had stopped: the runtime no longer had it (its host restarted?); ${fresh}`;
  if (info.unfinished && info.state !== 'dead')
    return `the sandbox's start was cut short (the server stopped before it could reach its API daemon or mount its volumes); ${fresh}`;
  const out = lastOutput(await driver.daemonLog(id).catch(() => undefined));
  const oom = info.ended?.oomKills ? `, ${info.ended.oomKills} of them by the out-of-memory killer` : '';
  return (
    `the sandbox had stopped: its API daemon ended and every process in it with it${oom} ` +
    `(the daemon's last output: ${out ? JSON.stringify(out) : 'nothing after it started'}); ${fresh}`
  );
}

/** The events of the egress proxy going down and coming back, for the sandboxes whose connections it carries. */
export function egressProxyMessage(e: ProxyEvent): string {
  return e.state === 'down'
    ? `egress proxy down: the process that carries the sandbox's outbound connections under its network policy ${e.reason}; connections through it were cut and new ones fail until it is back (it restarts by itself)`
    : `egress proxy back after ${e.downMs} ms: outbound connections under the sandbox's network policy work again`;
}

/** Says a proxy event on every Sandbox object whose runtime address the proxy carried. */
export async function sayEgressProxy(deps: Omit<FaultDeps, 'sweepMs'>, e: ProxyEvent): Promise<void> {
  const sources = new Set(e.sources);
  const ids = new Set((await deps.driver.list()).filter((i) => sources.has(i.address)).map((i) => i.id));
  if (!ids.size) return;
  const message = egressProxyMessage(e);
  for (const o of await deps.resources.store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' }))
    if (ids.has(sandboxId(o.workspace, o.name))) await recordHeld(deps.resources, keyOf(o), message);
}
