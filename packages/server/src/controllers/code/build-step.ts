// A build as its own tracked step (decision 044). The reconcile of an agent, function or job asks for the build of
// its source and returns at once: the build runs here, never inside one of the reconcile queue's slots, under its own
// concurrency and its workspace's build quota (decision 040), and every object that asked is reconciled again when
// its build starts and when it ends (the outcome is handed to each once). Records live in memory: a server stopped
// mid-build builds again at its next start, where the object's reconcile asks again.
import type { Logger } from 'pino';
import type { BaseImage, BuiltApp, Builder } from '../../builds/builder.js';
import { BUILD_MEMORY_MB } from '../../builds/sandbox-step.js';
import type { ResourceKey } from '../../store/store.js';
import { isRefusal, type Lease, type QuotaLedger } from '../core/quota-ledger.js';

/**
 * Builds running at once on this server, all workspaces together: each is a 2 GB sandbox running a package manager
 * and a compiler on the same cores, so more at once only make each slower; the others wait in order of asking.
 */
export const MAX_CONCURRENT_BUILDS = 4;

export type BuildState =
  /** Waiting for a build slot: the server's (`quota` unset), or its workspace's quota (`quota` says which). */
  | { state: 'waiting'; quota?: string }
  | { state: 'running' }
  | { state: 'built'; app: BuiltApp }
  | { state: 'failed'; error: unknown };

interface Build {
  key: string;
  workspace: string;
  digest: string;
  base?: BaseImage;
  /** The objects that asked for it, by their name in the queue (ownerId). */
  owners: Map<string, ResourceKey>;
  state: BuildState;
  stop?: AbortController;
}

export interface BuildStepsDeps {
  builder: Pick<Builder, 'keyOf' | 'build'>;
  /** The workspaces' build slots and memory; none: only the server's own bound. */
  quota?: QuotaLedger;
  logger?: Logger;
  concurrency?: number;
}

const ownerId = (k: ResourceKey) => `${k.kind}\0${k.workspace}\0${k.name}`;

export class BuildSteps {
  /** Builds waiting or running, by build key (a key names its workspace: Builder.keyOf). */
  private readonly builds = new Map<string, Build>();
  /** Builds that ended, by owner: handed to it once. */
  private readonly outcomes = new Map<string, { key: string; state: BuildState }>();
  private readonly queue: Build[] = [];
  private readonly running = new Set<Promise<void>>();
  private readonly concurrency: number;
  private wake: (key: ResourceKey) => void = () => undefined;
  private stopped = false;

  constructor(private readonly deps: BuildStepsDeps) {
    this.concurrency = deps.concurrency ?? MAX_CONCURRENT_BUILDS;
  }

  /** Who reconciles an object again when its build starts or ends (the controller manager's wake). */
  onChange(wake: (key: ResourceKey) => void): void {
    this.wake = wake;
  }

  /**
   * The build of `digest` on `base` in `owner`'s workspace, as it stands for `owner`: its outcome once it ended
   * (handed over once), else the build under way or waiting, joined, else a new one asked for. An owner follows
   * one build: asking for another drops it from the one it asked for before.
   */
  request(owner: ResourceKey, digest: string, base: BaseImage | undefined): BuildState {
    const key = this.deps.builder.keyOf(owner.workspace, digest, base);
    const id = ownerId(owner);
    const ended = this.outcomes.get(id);
    if (ended?.key === key) {
      this.outcomes.delete(id);
      return ended.state;
    }
    this.forget(owner, key);
    let b = this.builds.get(key);
    if (!b) {
      b = { key, workspace: owner.workspace, digest, base, owners: new Map(), state: { state: 'waiting' } };
      this.builds.set(key, b);
      this.queue.push(b);
    }
    b.owners.set(id, owner);
    this.pump();
    return b.state;
  }

  /** The outcome of `owner`'s build of `key` if it ended since it asked (handed over once), else undefined. */
  outcome(owner: ResourceKey, key: string): BuildState | undefined {
    const id = ownerId(owner);
    const ended = this.outcomes.get(id);
    if (ended?.key !== key) return undefined;
    this.outcomes.delete(id);
    return ended.state;
  }

  /**
   * `owner` no longer waits for a build (deleted, deactivated, or it asks for another source's, `except`): a build no
   * one waits for any more is called off.
   */
  forget(owner: ResourceKey, except?: string): void {
    const id = ownerId(owner);
    if (this.outcomes.get(id)?.key !== except) this.outcomes.delete(id);
    for (const b of [...this.builds.values()]) {
      if (b.key === except || !b.owners.delete(id) || b.owners.size > 0) continue;
      this.builds.delete(b.key);
      const waiting = this.queue.indexOf(b);
      if (waiting >= 0) this.queue.splice(waiting, 1);
      b.stop?.abort(new Error('no object waits for this build any more'));
    }
  }

  /** Stops every build under way and waits for them; nothing starts after. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.queue.length = 0;
    for (const b of this.builds.values()) b.stop?.abort(new Error('the server is stopping'));
    await Promise.all([...this.running]);
  }

  /** Starts waiting builds in order while slots are free: the server's, then each one's workspace quota. */
  private pump(): void {
    for (let i = 0; i < this.queue.length && this.running.size < this.concurrency && !this.stopped; ) {
      const b = this.queue[i];
      const slot = this.deps.quota?.take(b.workspace, 'builds', BUILD_MEMORY_MB);
      if (slot && isRefusal(slot)) {
        b.state = { state: 'waiting', quota: slot.message };
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      this.start(b, slot);
    }
  }

  private start(b: Build, slot: Lease | undefined): void {
    if (slot?.admitted) {
      // In a cluster the slot is judged once more by the database, against every node's builds (decision 092);
      // refused there, the build waits in the queue again, and its owners' next look pumps it.
      const judged: Promise<void> = slot.admitted
        .then((refused) => {
          this.running.delete(judged);
          // Called off while the database judged (its last owner deleted, or the server stopping): nothing to run.
          if (this.stopped || this.builds.get(b.key) !== b || b.owners.size === 0) {
            if (!refused) slot.release();
            return;
          }
          if (!refused) return this.run(b, slot);
          b.state = { state: 'waiting', quota: refused.message };
          this.queue.unshift(b);
        })
        .catch((err) => {
          this.running.delete(judged);
          this.deps.logger?.error({ err, build: b.key }, 'a build step failed to start');
        });
      this.running.add(judged);
      return;
    }
    this.run(b, slot);
  }

  private run(b: Build, slot: Lease | undefined): void {
    b.state = { state: 'running' };
    b.stop = new AbortController();
    // The objects built own the build's instances: the first that asked is recorded as their owner.
    const [first] = b.owners.values();
    const run: Promise<void> = this.deps.builder
      .build(b.workspace, b.digest, b.stop.signal, b.base, { kind: first.kind, name: first.name })
      .then(
        (app): BuildState => ({ state: 'built', app }),
        (error): BuildState => ({ state: 'failed', error }),
      )
      .then((state) => {
        this.running.delete(run);
        slot?.release();
        if (this.builds.get(b.key) === b) this.builds.delete(b.key);
        b.state = state;
        if (this.stopped) return;
        for (const [id, owner] of b.owners) {
          this.outcomes.set(id, { key: b.key, state });
          this.wake(owner);
        }
        this.pump();
      })
      .catch((err) => this.deps.logger?.error({ err, build: b.key }, 'a build step failed to settle'));
    this.running.add(run);
    for (const owner of b.owners.values()) this.wake(owner);
  }
}
