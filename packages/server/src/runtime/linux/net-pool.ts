// A few network namespaces made ahead of time, so creating a sandbox does not wait for the six
// netlink operations of a new namespace and veth pair (measured 15-25 ms of a ~100 ms create).
// A pooled network holds a slot like a sandbox does, owned by `<dataDir>/pool/<pid>.<start>.<n>`;
// taking one hands the slot to the sandbox's directory in one atomic rename.
import { BackgroundFill } from './background-fill.js';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createSlotNetwork, deleteSlotNetwork, slotNet, slotNetworkExists } from './network.js';
import { claimSlot, releaseSlot, transferSlot } from './slots.js';
import { isProcessAlive, processStartTime } from './state.js';

export const slotName = (slot: number) => `sb${slot}`;

interface Pooled {
  slot: number;
  ownerDir: string;
}

export class NetPool {
  private readonly ready: Pooled[] = [];
  private readonly fill = new BackgroundFill();
  private seq = 0;
  private closed = false;
  private readonly dir: string;
  private readonly tag: string;
  /** Why the last refill failed, for diagnostics (a failed refill only leaves the pool smaller). */
  get lastError(): Error | undefined {
    return this.fill.lastError;
  }

  constructor(
    dataDir: string,
    private readonly size: number,
    /** The server's BERTH_SANDBOX_ALLOW_CIDRS, opened to each pooled network's address. */
    private readonly allowCidrs: string[] = [],
  ) {
    this.dir = join(dataDir, 'pool');
    this.tag = `${process.pid}.${processStartTime(process.pid) ?? 0}`;
  }

  /**
   * Deletes the directories of networks pooled by driver processes of this data dir that no longer run (a crash or
   * kill -9); their slots and networks, whatever their data dir, are the host sweep's (host-sweep.ts), which runs
   * first.
   */
  sweep(): void {
    if (!existsSync(this.dir)) return;
    for (const n of readdirSync(this.dir)) {
      const [pid, start] = n.split('.').map(Number);
      if (!isProcessAlive(pid, start)) rmSync(join(this.dir, n), { recursive: true, force: true });
    }
  }

  /**
   * A ready slot, now owned by `ownerDir`, or undefined when the pool is empty. The caller refills
   * once its sandbox answers: refilling at once would compete with the sandbox's start for the CPU.
   */
  async take(ownerDir: string): Promise<number | undefined> {
    for (let p = this.ready.shift(); p; p = this.ready.shift()) {
      const ok =
        slotNetworkExists(slotNet(p.slot, slotName(p.slot))) &&
        (await transferSlot(p.slot, p.ownerDir, ownerDir));
      await rm(p.ownerDir, { recursive: true, force: true });
      if (ok) return p.slot;
    }
    return undefined;
  }

  /** Tops the pool up in the background; failures only leave it smaller. */
  refill(): void {
    if (this.closed) return;
    this.fill.start(this.size - this.ready.length - this.fill.inflight, () => this.makeOne());
  }

  private async makeOne(): Promise<void> {
    const ownerDir = join(this.dir, `${this.tag}.${this.seq++}`);
    mkdirSync(ownerDir, { recursive: true, mode: 0o700 });
    const slot = await claimSlot(ownerDir);
    try {
      await createSlotNetwork(slotNet(slot, slotName(slot)), this.allowCidrs);
    } catch (e) {
      await this.discard({ slot, ownerDir });
      throw e;
    }
    if (this.closed) await this.discard({ slot, ownerDir });
    else this.ready.push({ slot, ownerDir });
  }

  private async discard(p: Pooled): Promise<void> {
    await deleteSlotNetwork(slotNet(p.slot, slotName(p.slot)));
    await releaseSlot(p.slot, p.ownerDir);
    await rm(p.ownerDir, { recursive: true, force: true });
  }

  get readyCount(): number {
    return this.ready.length;
  }

  async whenIdle(): Promise<void> {
    await this.fill.idle();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.fill.idle();
    for (let p = this.ready.shift(); p; p = this.ready.shift()) await this.discard(p);
  }
}
