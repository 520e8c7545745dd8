// The runtime instances this node runs, each owned by an object (decision 044): a Sandbox object's sandbox, an agent's
// or function's replica, a build step of the object it builds, a job's task. The one place an instance is started
// (the driver's ensure, then its daemon's /health), removed, and collected when its owner no longer wants it: as
// Kubernetes' garbage collector follows owner references, each owner kind registers how to tell which of its
// instances it still wants, and nothing else needs to know another kind's instances. What `list` returns (every
// instance with its owner) is what a node reports about itself when several servers share one database.
import type { Logger } from 'pino';
import { DaemonClient } from '../sandbox-api/client.js';
import type { InstanceOwner, InstanceRole, RuntimeDriver, SandboxInfo, SandboxSpec } from './driver.js';

/** Something an instance holds while it runs and gives back when it goes: its slot in its workspace's quotas. */
export interface Held {
  release(): void;
}

/** An instance as the node reports it: the runtime's view, and its role (recorded, or known from its id). */
export interface OwnedInstance extends SandboxInfo {
  role?: InstanceRole;
}

/** How an owner kind tells the garbage collector which of its instances it still wants. */
export interface OwnerRegistration {
  /** The owner kinds it answers for (an instance's `owner.kind`). */
  kinds: readonly string[];
  /**
   * The role of an instance started before owners were recorded, known from the id its kinds gave it; undefined
   * for an id that is not theirs. Only for data dirs of an earlier server.
   */
  legacyRole?: (id: string) => InstanceRole | undefined;
  /**
   * Of `instances` (each owned by one of `kinds`, or claimed by `legacyRole`), the ids its owners still want: an
   * owner that exists and asks for them. Every other one is removed.
   */
  keep(instances: OwnedInstance[]): Promise<Iterable<string>>;
}

/** A started instance: what the runtime says of it, and its daemon. */
export interface Started {
  info: SandboxInfo;
  daemon: DaemonClient;
}

export interface StartRequest {
  id: string;
  spec: SandboxSpec;
  owner: InstanceOwner;
  /** Aborts the wait for the daemon (the instance is then removed). */
  signal?: AbortSignal;
  /** Held while the instance lives (given back by remove or free, or at once when the start fails). */
  lease?: Held;
}

export interface InstancesDeps {
  driver: RuntimeDriver;
  logger?: Logger;
  /** How long a started daemon may take to answer /health (sandbox-api/client.ts HEALTH_WAIT_MS unless set). */
  healthWaitMs?: number;
  /** The first wait before a failed removal is tried again (REMOVE_RETRY_MS unless set); doubled each time. */
  removeRetryMs?: number;
}

/** A failed removal is tried again after 2 s, 4 s, … 32 s: about a minute in all. */
const REMOVE_RETRY_MS = 2_000;
const REMOVE_RETRIES = 5;

export class Instances {
  private readonly owners: OwnerRegistration[] = [];
  private readonly leases = new Map<string, Held>();
  /** Removals that failed, waiting to be tried again. */
  private readonly retries = new Map<string, NodeJS.Timeout>();

  constructor(private readonly deps: InstancesDeps) {}

  get driver(): RuntimeDriver {
    return this.deps.driver;
  }

  /** Adds an owner kind's registration; every owner kind of the server registers before `collect`. */
  register(r: OwnerRegistration): void {
    this.owners.push(r);
  }

  /** The daemon of an instance. */
  daemon(info: Pick<SandboxInfo, 'socketPath'>): DaemonClient {
    return DaemonClient.at(info.socketPath);
  }

  /**
   * Makes the instance run for its owner (the driver's ensure: idempotent for the same spec) and waits for its
   * daemon to answer. A start that fails (or whose wait is aborted) leaves nothing: the instance is removed and
   * its lease given back, and the error thrown.
   */
  async start(r: StartRequest): Promise<Started> {
    // A removal of an earlier instance of this id still to be retried must not remove this one.
    clearTimeout(this.retries.get(r.id));
    this.retries.delete(r.id);
    if (r.lease) this.leases.set(r.id, r.lease);
    try {
      const info = await this.deps.driver.ensure(r.id, { ...r.spec, owner: r.owner });
      const daemon = this.daemon(info);
      await daemon.waitHealthy(r.signal, this.deps.healthWaitMs);
      return { info, daemon };
    } catch (err) {
      await this.remove(r.id).catch(() => undefined);
      throw err;
    }
  }

  /** Counts `lease` as held by an instance that runs already (re-adopted after a restart). */
  hold(id: string, lease: Held): void {
    this.leases.get(id)?.release();
    this.leases.set(id, lease);
  }

  /** Gives the instance's lease back now (its work has ended; the instance itself is removed later). */
  free(id: string): void {
    this.leases.get(id)?.release();
    this.leases.delete(id);
  }

  /**
   * Kills every process of the instance and deletes what it holds, lease included; idempotent. A removal that fails
   * (a network namespace slow to go on a loaded host) is tried again in the background until it succeeds or its
   * retries run out, and the caller gets the first error: its owner has moved on (an ended task, a dropped replica),
   * so nothing else would remove the dead instance, which would hold its directory and slot until the next start.
   */
  async remove(id: string): Promise<void> {
    this.free(id);
    try {
      await this.deps.driver.remove(id);
    } catch (err) {
      this.retryRemove(id, 0);
      throw err;
    }
  }

  private retryRemove(id: string, tried: number): void {
    if (tried >= REMOVE_RETRIES || this.retries.has(id)) return;
    const timer = setTimeout(
      () => {
        this.retries.delete(id);
        this.deps.driver.remove(id).catch((err) => {
          this.deps.logger?.warn(
            { err, instance: id, tried: tried + 1 },
            'removing an instance failed again',
          );
          this.retryRemove(id, tried + 1);
        });
      },
      (this.deps.removeRetryMs ?? REMOVE_RETRY_MS) * 2 ** tried,
    );
    timer.unref();
    this.retries.set(id, timer);
  }

  /** Every instance of this node with its role: what the node holds and for whom. */
  async list(): Promise<OwnedInstance[]> {
    return (await this.deps.driver.list()).map((i) => this.withRole(i));
  }

  private withRole(i: SandboxInfo): OwnedInstance {
    if (i.owner) return { ...i, role: i.owner.role };
    for (const o of this.owners) {
      const role = o.legacyRole?.(i.id);
      if (role) return { ...i, role };
    }
    return i;
  }

  /** The registration that answers for an instance: by its owner's kind, or the one claiming its id. */
  private ownerOf(i: SandboxInfo): OwnerRegistration | undefined {
    if (i.owner) return this.owners.find((o) => o.kinds.includes(i.owner?.kind ?? ''));
    return this.owners.find((o) => o.legacyRole?.(i.id) !== undefined);
  }

  /**
   * Removes every instance no owner wants: its owner is gone, no longer asks for it, or is of a kind nothing
   * registered. Run once at start, before any owner starts anything (an instance started meanwhile would not be
   * wanted yet). Returns the removed ids.
   */
  async collect(): Promise<string[]> {
    const all = await this.list();
    const byOwner = new Map<OwnerRegistration | undefined, OwnedInstance[]>();
    for (const i of all) {
      const o = this.ownerOf(i);
      byOwner.set(o, [...(byOwner.get(o) ?? []), i]);
    }
    const removed: string[] = [];
    for (const [o, mine] of byOwner) {
      const kept = new Set(o ? await o.keep(mine) : []);
      for (const i of mine) {
        if (kept.has(i.id)) continue;
        await this.remove(i.id).catch((err) =>
          this.deps.logger?.warn({ err, instance: i.id }, 'removing an unwanted instance failed'),
        );
        removed.push(i.id);
      }
    }
    if (removed.length) this.deps.logger?.info({ instances: removed }, 'removed instances no owner wants');
    return removed;
  }
}
