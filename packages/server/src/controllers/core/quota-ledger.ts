// What each workspace holds against its quotas right now (decision 040). Sandboxes are the store's: loaded at start,
// then kept current by the store's watch, which runs in the same synchronous step as each commit, so this index is
// the committed state whenever any other code runs. Replicas, builds and job tasks are leases their owners take
// before starting one and release when it ends (re-taken at start for what is re-adopted, so a restart loses
// nothing). `take` judges and leases in one synchronous step: two starts in this process never both pass, and a
// sandbox create, judged inside its store transaction, sees every lease taken before it (quota-admission.ts).
import type { QuotaLimits } from '../../config.js';
import type { HeldGroup, HeldRow, QuotaLeases } from '../../cluster/quota-leases.js';
import { keyString, type Store, EVERY_WORKSPACE } from '../../store/store.js';
import {
  type Consumer,
  emptyUsage,
  judge,
  type Refusal,
  sandboxMemoryMb,
  withSandboxUse,
  type Usage,
} from './quotas.js';

export interface Lease {
  readonly workspace: string;
  readonly consumer: Consumer;
  readonly memoryMb: number;
  /** The workload that holds it (a deploy's new replica does not count the replicas it replaces). */
  readonly owner?: string;
  /** Gives the slot back; a second call does nothing. */
  release(): void;
  /**
   * In a cluster, the database's judgement of the lease against what every live node holds
   * (docs/decisions/092-cluster-wide-counts.md): a refusal when another node took the room first (the lease is given
   * back then), undefined once admitted. Whoever starts something in the slot waits for it first. Absent on SQLite.
   */
  readonly admitted?: Promise<Refusal | undefined>;
}

export interface TakeOptions {
  owner?: string;
  /** Leases of this owner are not counted (they are about to be released). */
  excludeOwner?: string;
  /** Leased whatever the limits say: what already runs (re-adopted at start) must be counted, not refused. */
  force?: boolean;
  /** What the refusal calls the thing asked for, and what the workspace can do about it. */
  noun?: string;
  fix?: string;
}

const NOUNS: Record<Consumer, { noun: string; fix: string }> = {
  replicas: {
    noun: 'one more replica',
    fix: 'Delete or scale down (runtime.maxScale) another agent or function, or delete a sandbox',
  },
  builds: { noun: 'a build', fix: 'It starts when another build ends' },
  jobTasks: { noun: 'a job task', fix: 'It starts when another task ends' },
};

/** How often a node of a cluster reads what the other nodes hold (its early answer; the database decides). */
export const OTHERS_READ_MS = 1_000;

/**
 * Adds grouped holdings to `u`, this node's of `excludeOwner` left out: a deploy replaces its own replicas here, and
 * those of other nodes only count.
 */
export function addHeld(u: Usage, held: Iterable<HeldGroup>, excludeOwner?: string): Usage {
  for (const g of held) {
    if (excludeOwner !== undefined && g.mine && g.owner === excludeOwner) continue;
    const c = g.consumer as Consumer;
    if (c !== 'replicas' && c !== 'builds' && c !== 'jobTasks') continue;
    u[c] += g.count;
    u.memoryMb[c] += g.memoryMb;
  }
  return u;
}

export class QuotaLedger {
  /** Workspace → the memory of each of its sandboxes that holds quota, by store key. */
  private readonly sandboxes = new Map<string, Map<string, number>>();
  private readonly leases = new Map<string, Set<Lease>>();
  /** In a cluster: what the other live nodes held at the last read, by workspace. */
  private others = new Map<string, HeldGroup[]>();
  /** In a cluster: leases held here whose row the database does not have yet (taken before the node joined). */
  private readonly unwritten = new Map<
    Lease,
    { row: HeldRow; written: { id?: Promise<string | undefined> } }
  >();
  private othersTimer?: NodeJS.Timeout;
  private unwatch?: () => void;

  constructor(
    private readonly store: Store,
    private readonly defaults: QuotaLimits,
    /** In a cluster, the holdings of every node in the database; undefined on SQLite (one server). */
    private readonly shared?: {
      leases: () => QuotaLeases | undefined;
      warn: (err: unknown, msg: string) => void;
      /**
       * The settings the leader of the controllers published (its BERTH_QUOTA_*): every node judges with them, so
       * the cluster has one set. Undefined while this server leads, or no leader is known: its own.
       */
      leaderLimits?: () => Record<string, unknown> | undefined;
    },
  ) {}

  /** The leader's published settings last merged, and the result (their object changes at each read of the nodes). */
  private merged?: { from: Record<string, unknown>; limits: QuotaLimits };

  /** Reads what the other nodes hold now (also every OTHERS_READ_MS once started). */
  async readOthers(): Promise<void> {
    const leases = this.shared?.leases();
    if (!leases) return;
    for (const l of [...this.unwritten.keys()]) this.write(l);
    const next = new Map<string, HeldGroup[]>();
    for (const g of await leases.others()) {
      const list = next.get(g.workspace) ?? [];
      list.push(g);
      next.set(g.workspace, list);
    }
    this.others = next;
  }

  /** Loads the sandboxes and follows the store; call before anything creates or starts. */
  async start(): Promise<void> {
    this.unwatch = this.store.watch((c) => {
      if (c.object.kind !== 'Sandbox') return;
      this.index(keyString(c.object), c.object.workspace, c.type === 'DELETED' ? undefined : c.object.body);
    });
    for (const o of await this.store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' }))
      this.index(keyString(o), o.workspace, o.body);
  }

  close(): void {
    this.unwatch?.();
    if (this.othersTimer) clearInterval(this.othersTimer);
  }

  /** In a cluster: reads what the other nodes hold every OTHERS_READ_MS (the local early answer's copy). */
  followOthers(): void {
    if (!this.shared || this.othersTimer) return;
    this.othersTimer = setInterval(
      () => void this.readOthers().catch((err) => this.shared?.warn(err, 'could not read the quota leases')),
      OTHERS_READ_MS,
    );
    this.othersTimer.unref();
  }

  private index(key: string, workspace: string, body: any) {
    const memoryMb = sandboxMemoryMb(body);
    let ws = this.sandboxes.get(workspace);
    if (memoryMb === undefined) {
      ws?.delete(key);
      if (ws && !ws.size) this.sandboxes.delete(workspace);
      return;
    }
    if (!ws) {
      ws = new Map();
      this.sandboxes.set(workspace, ws);
    }
    ws.set(key, memoryMb);
  }

  /**
   * The workspace's limits: the server's settings, or in a cluster the leader's (the one place a per-workspace
   * override would go). A setting the leader does not publish (an older version) is this server's.
   */
  limits(_workspace: string): QuotaLimits {
    const theirs = this.shared?.leaderLimits?.();
    if (!theirs) return this.defaults;
    if (this.merged?.from !== theirs) {
      const limits = { ...this.defaults };
      for (const k of Object.keys(limits) as (keyof QuotaLimits)[]) {
        const v = theirs[k];
        if (typeof v === 'number' && Number.isFinite(v) && v >= 0) limits[k] = v;
      }
      this.merged = { from: theirs, limits };
    }
    return this.merged.limits;
  }

  /**
   * Replicas, builds and job tasks running for the workspace (sandboxes left at zero): this node's (those of
   * `excludeOwner` left out), and in a cluster the other nodes' as last read, or as `others` says (read just now).
   */
  running(workspace: string, excludeOwner?: string, others?: HeldGroup[]): Usage {
    return addHeld(this.local(workspace, excludeOwner), others ?? this.others.get(workspace) ?? []);
  }

  /**
   * In a cluster, what a sandbox create's transaction reads under the workspace's lock (QuotaLeases.lockedReads);
   * undefined on one server, or while this node has not joined.
   */
  lockedReads(workspace: string) {
    return this.shared?.leases()?.lockedReads(workspace);
  }

  private local(workspace: string, excludeOwner?: string): Usage {
    const u = emptyUsage();
    for (const l of this.leases.get(workspace) ?? []) {
      if (excludeOwner !== undefined && l.owner === excludeOwner) continue;
      u[l.consumer]++;
      u.memoryMb[l.consumer] += l.memoryMb;
    }
    return u;
  }

  private withSandboxes(workspace: string, u: Usage): Usage {
    for (const memoryMb of this.sandboxes.get(workspace)?.values() ?? []) {
      u.sandboxes++;
      u.memoryMb.sandboxes += memoryMb;
    }
    return u;
  }

  /** Everything the workspace holds: its sandboxes as committed, and what runs. */
  usage(workspace: string, excludeOwner?: string): Usage {
    return this.withSandboxes(workspace, this.running(workspace, excludeOwner));
  }

  /** A slot for one more `consumer` of `memoryMb`, or why it does not fit (nothing is held then). */
  take(workspace: string, consumer: Consumer, memoryMb: number, opts: TakeOptions = {}): Lease | Refusal {
    const what = {
      quota: consumer,
      askMb: memoryMb,
      noun: opts.noun ?? NOUNS[consumer].noun,
      fix: opts.fix ?? NOUNS[consumer].fix,
    };
    if (!opts.force) {
      const refusal = judge(
        workspace,
        this.limits(workspace),
        this.usage(workspace, opts.excludeOwner),
        what,
      );
      if (refusal) return refusal;
    }
    let set = this.leases.get(workspace);
    if (!set) {
      set = new Set();
      this.leases.set(workspace, set);
    }
    const held = set;
    let released = false;
    const row = { workspace, consumer, memoryMb, owner: opts.owner };
    const written: { id?: Promise<string | undefined> } = {};
    const drop = () => {
      released = true;
      held.delete(lease);
      this.unwritten.delete(lease);
      if (!held.size && this.leases.get(workspace) === held) this.leases.delete(workspace);
    };
    const leases = this.shared?.leases();
    let admitted: Promise<Refusal | undefined> | undefined;
    if (leases && !opts.force) {
      // The database's judgement: every live node's rows (this one's admitted leases among them) and the workspace's
      // sandboxes as committed there, under the workspace's lock, which a sandbox create takes too: two nodes cannot
      // both take the last room, whether with two replicas or with a replica and a sandbox.
      const asked = leases.admit(row, (rows, sandboxes) =>
        judge(
          workspace,
          this.limits(workspace),
          withSandboxUse(addHeld(emptyUsage(), rows, opts.excludeOwner), sandboxes),
          what,
        ),
      );
      written.id = asked.then(
        (r) => ('id' in r ? r.id : undefined),
        () => undefined,
      );
      admitted = asked.then(
        (r) => {
          if ('id' in r) return undefined;
          drop();
          return r.refused;
        },
        (err) => {
          this.shared?.warn(err, 'could not admit a quota lease in the database');
          drop();
          return {
            quota: consumer,
            limit: this.limits(workspace)[consumer],
            used: 0,
            message: `the cluster's count of workspace ${JSON.stringify(workspace)} could not be read (${(err as Error).message}); it is tried again`,
          };
        },
      );
    }
    const lease: Lease = {
      workspace,
      consumer,
      memoryMb,
      owner: opts.owner,
      ...(admitted ? { admitted } : {}),
      release: () => {
        if (released) return;
        drop();
        void written.id
          ?.then((id) => (id ? this.shared?.leases()?.release(id) : undefined))
          .catch((err) => this.shared?.warn(err, 'could not give back a quota lease'));
      },
    };
    held.add(lease);
    // What runs already, or starts now: counted in the database unjudged (written at the next read when the node has
    // not joined yet, or the write failed).
    if (this.shared && !admitted) this.unwritten.set(lease, { row, written });
    if (leases && !admitted) this.write(lease);
    return lease;
  }

  /** Writes an unwritten lease's row, unjudged; left for the next read when that fails. */
  private write(lease: Lease): void {
    const u = this.unwritten.get(lease);
    const leases = this.shared?.leases();
    if (!u || !leases) return;
    this.unwritten.delete(lease);
    u.written.id = leases.admit(u.row, 'force').then(
      (r) => {
        const id = 'id' in r ? r.id : undefined;
        // Given back while it was written: the row goes too.
        if (id && !this.leases.get(lease.workspace)?.has(lease))
          void leases.release(id).catch(() => undefined);
        return id;
      },
      (err) => {
        this.shared?.warn(err, 'could not write a quota lease in the database; tried again');
        if (this.leases.get(lease.workspace)?.has(lease)) this.unwritten.set(lease, u);
        return undefined;
      },
    );
  }
}

export const isRefusal = (x: Lease | Refusal): x is Refusal => 'quota' in x;
