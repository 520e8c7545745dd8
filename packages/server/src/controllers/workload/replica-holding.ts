// What each node of a cluster runs for the agents, functions and applications whose replica slots are placed on it
// (docs/decisions/086-replicas-across-nodes.md): their deployed revisions (active, and canary), with its share of
// their scale, on its own runtime; and nothing of a workload placed elsewhere. The leader's placement
// (replica-placement.ts) says where; this node does the node-local work (start, re-adopt, scale, freeze through its
// gateway, remove) and writes no status: the object's status is the leader's deploy's. The app is the revision's
// build: copied ahead already (controllers/code/builds-ahead.ts), or copied here from a node holding it before its
// replicas start (builds/app-copies.ts; built here only when no live node holds it); an application's is its image,
// copied here ahead (decision 087). The gateways send the workload's requests to the nodes that serve it meanwhile.
import type { Logger } from 'pino';
import type { BuiltApp, Builder } from '../../builds/builder.js';
import type { CodeStore } from '../../builds/code-store.js';
import {
  PLACED_KINDS,
  placeable,
  type ReplicaPlacements,
  serves,
  shareOf,
} from '../../cluster/replica-placements.js';
import { ConnectionTokenFailed, type ConnectionTokens } from '../../oauth/connection-tokens.js';
import type { ImageStore } from '../../runtime/images/image-store.js';
import type { Resources } from '../../store/resources.js';
import { keyOf, type ResourceKey, type StoredObject } from '../../store/store.js';
import type { RevisionRecord } from '../code/source.js';
import { failedByConnection, runOf, type WorkloadKind, workloadOf } from './deploy.js';
import { applicationWorkload, placedApplicationRuns } from './application.js';
import { type ReplicaSet, type RevisionRun, type Workload, workloadKey } from './replicas.js';

/** How often every workload is looked at again (an app built ahead since, a failed start's backoff over). */
const PASS_MS = 1_000;
/** First wait after a failed start here, doubled up to MAX_BACKOFF_MS. */
const FIRST_BACKOFF_MS = 2_000;
const MAX_BACKOFF_MS = 60_000;
/** How long a stopping server waits for the starts under way. */
const STOP_WAIT_MS = 2_000;

export interface ReplicaHoldingDeps {
  self: string;
  resources: Resources;
  builder: Pick<Builder, 'builtByKey' | 'build' | 'baseImage'>;
  /** This node's image store: an application's revision runs its image, copied here ahead (decision 087). */
  images: Pick<ImageStore, 'find' | 'markDeployed'>;
  /** This server's copies of uploaded sources (builds/code-copies.ts): a revision is built here from its copy. */
  code: Pick<CodeStore, 'has'>;
  replicas: ReplicaSet;
  placements: ReplicaPlacements;
  /**
   * This server's OAuth2 connection tokens: the replicas of a workload bound to connections read them from files
   * this node keeps fresh while it runs them (decision 101).
   */
  tokens?: ConnectionTokens;
  /** Whether this node leads the controllers: a workload being deployed (not DEPLOYED) is its deploy's then. */
  leads: () => boolean;
  /** Whether this node holds its lease (decision 064): without it, it starts nothing. */
  holding: () => boolean;
  /** The replicas this node serves changed: its next heartbeat says so at once (the other gateways read it). */
  changed: () => void;
  /**
   * Records an event on the workload's object as the node holding its replica slots (decision 092): fenced on its
   * `replicaNodes` and this node's lease, false when fenced off. Without it, failures are only logged.
   */
  report?: (key: ResourceKey, message: string) => Promise<boolean>;
  logger?: Logger;
}

type Kind = (typeof PLACED_KINDS)[number];

/** Whether two runs differ at most by their scale (a node's share moved): the replicas running serve on. */
const sameButScale = (a: RevisionRun, b: RevisionRun) =>
  JSON.stringify({ ...a, minScale: 0, maxScale: 0 }) === JSON.stringify({ ...b, minScale: 0, maxScale: 0 });

export class ReplicaHolding {
  private readonly busy = new Set<string>();
  private readonly failed = new Map<
    string,
    { count: number; notBefore: number; said?: string; spec: string }
  >();
  private timer?: NodeJS.Timeout;
  private unwatch?: () => void;
  private stopped = false;
  private running = new Set<Promise<void>>();
  private readonly abort = new AbortController();

  constructor(private readonly deps: ReplicaHoldingDeps) {}

  start(): void {
    this.unwatch = this.deps.resources.store.watch((c) => {
      if (!(PLACED_KINDS as readonly string[]).includes(c.object.kind)) return;
      if (c.type !== 'DELETED') this.look(c.object);
      else this.look({ ...c.object, body: { ...c.object.body, status: 'TERMINATED' } });
    });
    this.timer = setInterval(() => this.pass(), PASS_MS);
    this.timer.unref();
    this.pass();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort(new Error('the server is stopping'));
    this.unwatch?.();
    if (this.timer) clearInterval(this.timer);
    // A start under way is not waited for long: its sandbox, left running, is re-adopted at the next start.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.running),
      new Promise((r) => {
        timer = setTimeout(r, STOP_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  private pass(): void {
    for (const o of this.deps.placements.objects()) this.look(o);
  }

  /** Brings this node's replicas of `o` to what its placement says, unless that is under way already. */
  private look(o: StoredObject): void {
    if (this.stopped || !this.deps.holding()) return;
    const id = `${o.kind}/${o.workspace}/${o.name}`;
    if (this.busy.has(id)) return;
    const f = this.failed.get(id);
    // A spec changed since the failure (fixed, say) is tried at once rather than after the backoff.
    const specOf = () => JSON.stringify(o.body.spec ?? null);
    if (f && f.notBefore > Date.now() && f.spec === specOf()) return;
    this.busy.add(id);
    const p = this.sync(o)
      .then(async () => {
        this.failed.delete(id);
        if (f?.said) await this.say(o, `node ${this.deps.self}: the replicas placed on it run again`);
      })
      .catch(async (err) => {
        const count = (f?.count ?? 0) + 1;
        const wait = Math.min(FIRST_BACKOFF_MS * 2 ** (count - 1), MAX_BACKOFF_MS);
        const failure = { count, notBefore: Date.now() + wait, said: f?.said, spec: specOf() };
        this.failed.set(id, failure);
        this.deps.logger?.warn(
          { err, workspace: o.workspace, name: o.name, retryInMs: wait },
          'could not start the replicas placed on this node; trying again later',
        );
        // On the object, once per cause (the retries' backoff would repeat it).
        const cause = (err as Error).message;
        // Its first line: the rest (the app's last output) may differ between two starts failing the same way.
        const first = cause.split('\n')[0];
        if (failure.said === first) return;
        const message = `node ${this.deps.self} could not start the replicas placed on it (tried again with a backoff up to ${MAX_BACKOFF_MS / 1000} s; the ones it ran are left as they were): ${cause}`;
        if (await this.say(o, message)) failure.said = first;
      })
      .finally(() => {
        this.busy.delete(id);
        this.running.delete(p);
      });
    this.running.add(p);
  }

  /** An event on `o` as the node holding its slots; false when fenced off or not recorded. */
  private async say(o: StoredObject, message: string): Promise<boolean> {
    try {
      return (await this.deps.report?.(keyOf(o), message)) === true;
    } catch (err) {
      this.deps.logger?.warn({ err, workspace: o.workspace, name: o.name }, 'could not record an event');
      return false;
    }
  }

  /**
   * The built app of one of the object's revisions on this node: built ahead already (067), else built here now from
   * this node's copy of its source (a build the builds ahead loop runs at the same time is shared: Builder.build);
   * undefined while the copy has not arrived.
   */
  private async appOf(o: StoredObject, revision: unknown): Promise<BuiltApp | undefined> {
    const revisions: RevisionRecord[] = o.body.revisions ?? [];
    const rec = typeof revision === 'string' ? revisions.find((r) => r.id === revision) : undefined;
    if (!rec) return undefined;
    const { builder } = this.deps;
    const built = builder.builtByKey(o.workspace, rec.app);
    if (built || !this.deps.code.has(o.workspace, rec.source)) return built;
    const base = builder.baseImage(o.workspace, o.body.spec?.runtime?.image);
    // In a cluster Builder.build copies it from a node that holds it (decision 094), checked against the digest the
    // revision recorded at its build; it builds here only when no live node holds it.
    const app = await builder.build(
      o.workspace,
      rec.source,
      this.abort.signal,
      base,
      { kind: o.kind, name: o.name },
      { digest: rec.appDigest },
    );
    // Built on another base than the revision's (the spec's image changed since): not the revision's app.
    return app.key === rec.app ? app : undefined;
  }

  /** What this node runs of `o` with its `share`, and as what; undefined while its app or image is not here yet. */
  private async runsOf(
    o: StoredObject,
    share: { minScale: number; maxScale: number },
  ): Promise<
    | {
        run: RevisionRun;
        canary?: { run: RevisionRun; percent: number };
        workload: Pick<Workload, 'workspace' | 'kind' | 'name' | 'public' | 'route'>;
      }
    | undefined
  > {
    if (o.kind === 'Application') {
      const runs = placedApplicationRuns(this.deps, o, share);
      return runs && { ...runs, workload: applicationWorkload(o) };
    }
    const kind = o.kind as WorkloadKind;
    const active = await this.appOf(o, o.body.activeRevision);
    if (!active) return undefined;
    const percent: number = o.body.spec?.revision?.canaryPercent ?? 0;
    const canaryApp = percent > 0 ? await this.appOf(o, o.body.canaryRevision) : undefined;
    const deps = { resources: this.deps.resources, tokens: this.deps.tokens };
    const run = await runOf(deps, kind, o, active, [], share);
    const canary = canaryApp && { run: await runOf(deps, kind, o, canaryApp, [], share), percent };
    return { run, canary, workload: workloadOf(kind, o) };
  }

  private async sync(o: StoredObject): Promise<void> {
    const { replicas, self } = this.deps;
    const kind = o.kind as Kind;
    const local = replicas.get(o.workspace, kind, o.name);
    const leads = this.deps.leads();
    // While the leader deploys a new revision (or removes a deleted one), its deploy acts on its replica set.
    if (leads && (o.body.status !== 'DEPLOYED' || !placeable(o))) return;
    const placed: string[] = Array.isArray(o.body.replicaNodes) ? o.body.replicaNodes : [];
    // A workload FAILED by its connection's refused grant serves nowhere: the leader removed its own replicas.
    const share =
      placeable(o) && serves(o) && o.body.status !== 'TERMINATED' && !failedByConnection(o.body)
        ? shareOf(o, self)
        : undefined;
    const removeHere = async () => {
      await replicas.remove(o.workspace, kind, o.name);
      this.deps.tokens?.release(workloadKey(o.workspace, kind, o.name));
      if (local) this.deps.changed();
    };
    if (!share) {
      // Placed elsewhere, or not served any more: what runs here goes, and what an earlier server left of it here
      // (held for a deploy to claim) too. A workload not placed yet keeps the replica the leader's deploy started.
      if (placed.length > 0 || !leads) await removeHere();
      return;
    }
    let runs: Awaited<ReturnType<ReplicaHolding['runsOf']>>;
    try {
      runs = await this.runsOf(o, share);
    } catch (err) {
      // A connection's grant refused: the leader's deploy records it on the object (FAILED, in §7's words, which
      // an event of this node's must not follow); its replicas here go as the leader's do.
      if (!(err instanceof ConnectionTokenFailed)) throw err;
      this.deps.logger?.warn(
        { workspace: o.workspace, name: o.name, reason: err.message },
        'a connection of the workload was refused: its replicas on this node are removed',
      );
      await removeHere();
      return;
    }
    // Its source (or an application's image) not here yet: the other nodes serve meanwhile; the next pass looks again.
    if (!runs) return;
    const { run, canary, workload } = runs;
    if (local && replicas.matches(local, run, canary)) {
      local.public = workload.public;
      local.route = workload.route;
      return;
    }
    if (
      local &&
      sameButScale(local.run, run) &&
      !!local.canary === !!canary &&
      (!canary || (local.canary && sameButScale(local.canary.w.run, canary.run)))
    ) {
      // Its share moved (a slot added or dropped): the scaler tops up or lets idle ones go.
      local.run.minScale = run.minScale;
      local.run.maxScale = run.maxScale;
      if (local.canary && canary) {
        local.canary.w.run.minScale = run.minScale;
        local.canary.w.run.maxScale = run.maxScale;
        local.canary.percent = canary.percent;
      }
      local.public = workload.public;
      local.route = workload.route;
      return;
    }
    await replicas.deploy(workload, run, canary);
    this.deps.logger?.info(
      { workspace: o.workspace, name: o.name, revision: run.id, minScale: run.minScale },
      `${kind.toLowerCase()} replicas placed on this node serve`,
    );
    this.deps.changed();
  }
}
