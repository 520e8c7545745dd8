// What each workspace holds against its quotas right now (decision 040). Sandboxes are the store's: loaded at start,
// then kept current by the store's watch, which runs in the same synchronous step as each commit, so this index is
// the committed state whenever any other code runs. Replicas, builds and job tasks are leases their owners take
// before starting one and release when it ends (re-taken at start for what is re-adopted, so a restart loses
// nothing). `take` judges and leases in one synchronous step: two starts in this process never both pass, and a
// sandbox create, judged inside its store transaction, sees every lease taken before it (quota-admission.ts).
import type { QuotaLimits } from '../../config.js';
import { keyString, type Store, EVERY_WORKSPACE } from '../../store/store.js';
import { type Consumer, emptyUsage, judge, type Refusal, sandboxMemoryMb, type Usage } from './quotas.js';

export interface Lease {
  readonly workspace: string;
  readonly consumer: Consumer;
  readonly memoryMb: number;
  /** The workload that holds it (a deploy's new replica does not count the replicas it replaces). */
  readonly owner?: string;
  /** Gives the slot back; a second call does nothing. */
  release(): void;
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

export class QuotaLedger {
  /** Workspace → the memory of each of its sandboxes that holds quota, by store key. */
  private readonly sandboxes = new Map<string, Map<string, number>>();
  private readonly leases = new Map<string, Set<Lease>>();
  private unwatch?: () => void;

  constructor(
    private readonly store: Store,
    private readonly defaults: QuotaLimits,
  ) {}

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

  /** The workspace's limits: the server's defaults (the one place a per-workspace override would go). */
  limits(_workspace: string): QuotaLimits {
    return this.defaults;
  }

  /** Replicas, builds and job tasks running for the workspace (sandboxes left at zero). */
  running(workspace: string, excludeOwner?: string): Usage {
    const u = emptyUsage();
    for (const l of this.leases.get(workspace) ?? []) {
      if (excludeOwner !== undefined && l.owner === excludeOwner) continue;
      u[l.consumer]++;
      u.memoryMb[l.consumer] += l.memoryMb;
    }
    return u;
  }

  /** Everything the workspace holds: its sandboxes as committed, and what runs. */
  usage(workspace: string, excludeOwner?: string): Usage {
    const u = this.running(workspace, excludeOwner);
    for (const memoryMb of this.sandboxes.get(workspace)?.values() ?? []) {
      u.sandboxes++;
      u.memoryMb.sandboxes += memoryMb;
    }
    return u;
  }

  /** A slot for one more `consumer` of `memoryMb`, or why it does not fit (nothing is held then). */
  take(workspace: string, consumer: Consumer, memoryMb: number, opts: TakeOptions = {}): Lease | Refusal {
    if (!opts.force) {
      const refusal = judge(workspace, this.limits(workspace), this.usage(workspace, opts.excludeOwner), {
        quota: consumer,
        askMb: memoryMb,
        noun: opts.noun ?? NOUNS[consumer].noun,
        fix: opts.fix ?? NOUNS[consumer].fix,
      });
      if (refusal) return refusal;
    }
    let set = this.leases.get(workspace);
    if (!set) {
      set = new Set();
      this.leases.set(workspace, set);
    }
    const held = set;
    const lease: Lease = {
      workspace,
      consumer,
      memoryMb,
      owner: opts.owner,
      release: () => {
        held.delete(lease);
        if (!held.size && this.leases.get(workspace) === held) this.leases.delete(workspace);
      },
    };
    held.add(lease);
    return lease;
  }
}

export const isRefusal = (x: Lease | Refusal): x is Refusal => 'quota' in x;
