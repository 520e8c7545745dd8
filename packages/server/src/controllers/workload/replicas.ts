// The replicas of agents and functions: runtime sandboxes (not Sandbox objects) running one revision's start
// command with its app directory bound read-only at /app. Owned here; the workload controller says which
// revision should run (deploy), the gateway asks for a replica to send a request to (acquire) and reports use.
// Scale from zero starts ONE replica however many requests wait for it; a revision whose process exits before
// its port listens is a failed deploy, never a ready replica.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { ApiError } from '../../errors.js';
import type { TriggerRoute } from '../../kinds/trigger-path.js';
import { isRefusal, type Lease, type QuotaLedger } from '../core/quota-ledger.js';
import type { Refusal } from '../core/quotas.js';
import { lastOutput } from '../../sandbox-api/last-output.js';
import {
  defaultCpuShares,
  type EgressPolicy,
  type SandboxInfo,
  type SandboxSpec,
  specHash,
  type VolumeMount,
} from '../../runtime/driver.js';
import type { Instances } from '../../runtime/instances.js';
import { APP_DIR, APP_IMAGE, APP_PATH, APP_PIDS_MAX } from '../code/app.js';
import { keptInStandby, type StandbyMark } from './idle-standby.js';

/** Port the app listens on inside its replica (PORT, BL_SERVER_PORT). */
export const APP_PORT = 8080;
/** Id prefix of replicas' runtime instances (no other owner's ids start so). */
export const REPLICA_ID_PREFIX = 'wl-';
/** Name of the start command's process in a replica's daemon (re-adoption asks whether it still runs). */
export const APP_PROCESS = 'app';
/**
 * Replica sandboxes left by an earlier server wait this long for their workload's first deploy to claim them;
 * the controllers reconcile every workload at start, so one still unclaimed after it belongs to nothing.
 */
export const LEFTOVER_CLAIM_MS = 10 * 60_000;

/** How long a crashed replica's daemon is given to say how its app ended (it answers in a millisecond if alive). */
const CRASH_READ_MS = 1_000;
/** Lines of a crashed app's output its event quotes. */
const CRASH_OUTPUT_LINES = 5;

/** What a revision runs: fixed once deployed. */
export interface RevisionRun {
  id: string;
  /** Bound read-only at /app; '' when the image is the app (a Dockerfile build): its WorkingDir then. */
  appDir: string;
  /** The stored image the app was built on (by id); none: the default image. */
  image?: string;
  /** PATH on that image (imageFields). */
  path?: string;
  start: string;
  memoryMb: number;
  envs: Record<string, string>;
  minScale: number;
  maxScale: number;
  /**
   * The workload's volumes (spec.volumes), claimed by it and mounted on the host: bound into every replica. Part
   * of the sandbox spec, so a leftover replica is re-adopted only when it was started with the same mounts.
   */
  volumes: VolumeMount[];
  /** The port the app listens on (an application's spec.port); unset: APP_PORT. */
  port?: number;
  /**
   * The replicas' egress policy, when the workload's OAuth2 connections name API hosts (oauth/bindings.ts): the
   * proxy puts the connection's current token on requests to them. Holds no secret (the token is read from its file
   * at each request), so a refresh changes nothing here.
   */
  egress?: EgressPolicy;
}

export interface Replica {
  readonly id: string;
  readonly revision: string;
  readonly info: SandboxInfo;
  /** Requests in flight and the last one's start or end (epoch ms), as the gateway reports them (scaler.ts). */
  inflight: number;
  lastUsedMs: number;
  /** Removed (scaled in, redeployed, deleted): the gateway drops it. */
  gone: boolean;
  /** Kept frozen at scale to zero (idle-standby.ts, decision 090): serves nothing until a request wakes it. */
  standby?: StandbyMark;
}

/** How requests to a workload are routed: read per request, so changing them restarts no replica. */
export interface WorkloadRoute {
  /** `spec.revision.stickySessionTtl`: seconds a thread stays on its replica (0 = off; unset = the default). */
  stickyTtlS?: number;
  /** `spec.runtime.timeout`: seconds one request may last in all. */
  timeoutS?: number;
  /** Trigger paths (canonical) and how each is served: async or not, its own authenticationType. */
  paths?: Record<string, TriggerRoute>;
  /** The trigger paths under the object's own address, by what follows it (`/async`); unset when none. */
  ownPaths?: Record<string, TriggerRoute>;
}

/** One agent or function as the replica set knows it. */
export interface Workload {
  key: string;
  workspace: string;
  kind: 'Agent' | 'Function' | 'Application';
  name: string;
  run: RevisionRun;
  public: boolean;
  route?: WorkloadRoute;
  replicas: Replica[];
  /** The replica being started, shared by every request that waits for one. */
  starting?: Promise<Replica>;
  /** The canary revision's own replicas and its share of the traffic (percent), when one is set. */
  canary?: { w: Workload; percent: number };
  /** Replicas the autoscaler is starting (scaleOut). */
  extraStarts: number;
  /** Requests waiting for a replica to start, as the gateway reports them (the scaler counts them as concurrency). */
  waiting: number;
  seq: number;
  /** The last "replicas capped" note said on its object; cleared once a replica may start again. */
  capped?: string;
}

export class ReplicaStartError extends Error {
  override name = 'ReplicaStartError';
}

/** A deploy's replica does not fit the workspace's quotas now: the deploy waits (workload.ts), it does not fail. */
export class ReplicaQuotaError extends Error {
  override name = 'ReplicaQuotaError';
  constructor(readonly refusal: Refusal) {
    super(refusal.message);
  }
}

/** The port a revision's app listens on. */
export const portOf = (run: Pick<RevisionRun, 'port'>) => run.port ?? APP_PORT;

export const workloadKey = (workspace: string, kind: string, name: string) => `${workspace}/${kind}/${name}`;

/** How every replica id of one workload key (a canary's key ends in #canary) and revision starts. */
export function replicaIdPrefix(key: string, revision: string): string {
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 12);
  return `${REPLICA_ID_PREFIX}${hash}-${revision.slice(0, 8)}-`;
}

export interface ReplicaSetDeps {
  /** Where replicas start and go; each holds its slot of the workspace's quotas there while it lives. */
  instances: Instances;
  logger?: Logger;
  now?: () => number;
  /** The workspaces' replica slots and memory (decision 040); none: unbounded. */
  quota?: QuotaLedger;
  /**
   * Says on the workload's object, as an event, what it should know about its replicas: that it runs fewer than it
   * asks for and why (its workspace's quotas), or that one crashed and with what last output.
   */
  onEvent?: (w: Pick<Workload, 'workspace' | 'kind' | 'name'>, message: string) => void;
}

export class ReplicaSet {
  private readonly workloads = new Map<string, Workload>();
  /** Replica sandboxes of an earlier server that a deploy of the same key and revision may take over. */
  private readonly leftovers = new Map<string, SandboxInfo>();
  private readonly now: () => number;

  constructor(private readonly deps: ReplicaSetDeps) {
    this.now = deps.now ?? Date.now;
  }

  get(workspace: string, kind: string, name: string): Workload | undefined {
    return this.workloads.get(workloadKey(workspace, kind, name));
  }

  /** Every workload, canaries included (the sweeps and the autoscaler treat each on its own). */
  *all(): IterableIterator<Workload> {
    for (const w of this.workloads.values()) {
      yield w;
      if (w.canary) yield w.canary.w;
    }
  }

  /** The workloads with a replica running (`[kind, workspace, name]`), once each: what a leader reports it runs. */
  running(): [string, string, string][] {
    const out = new Map<string, [string, string, string]>();
    for (const w of this.all())
      if (w.replicas.some((r) => !r.gone))
        out.set(w.key.replace(/#canary$/, ''), [w.kind, w.workspace, w.name]);
    return [...out.values()];
  }

  /** Whether the workload already runs exactly these revisions with this configuration. */
  matches(
    w: Workload | undefined,
    run: RevisionRun,
    canary?: { run: RevisionRun; percent: number },
  ): boolean {
    if (!w || JSON.stringify(w.run) !== JSON.stringify(run)) return false;
    if (!canary) return !w.canary;
    return (
      w.canary !== undefined &&
      w.canary.percent === canary.percent &&
      JSON.stringify(w.canary.w.run) === JSON.stringify(canary.run)
    );
  }

  /**
   * Makes `run` the workload's revision (and `canary` its canary): starts one replica of each that is not running
   * already and waits for its port (throws ReplicaStartError with the app's output when it exits first), then
   * removes the replicas of revisions no longer wanted. Blue-green: traffic moves only once the new one listens.
   */
  async deploy(
    w: Pick<Workload, 'workspace' | 'kind' | 'name' | 'public' | 'route'>,
    run: RevisionRun,
    canary?: { run: RevisionRun; percent: number },
  ): Promise<void> {
    const key = workloadKey(w.workspace, w.kind, w.name);
    const cur = this.workloads.get(key);
    const pool = [cur, cur?.canary?.w].filter((x): x is Workload => x !== undefined);
    const reuse = (r: RevisionRun) => pool.find((x) => JSON.stringify(x.run) === JSON.stringify(r));
    const running = (r: RevisionRun) => reuse(r)?.replicas.some((x) => !x.gone) === true;
    // Slots for the new revisions' first replicas, all taken before anything starts; the replicas this deploy
    // replaces do not count (they go once the new ones listen). Not fitting, the deploy waits.
    const unused = new Set<Lease>();
    const slotFor = (r: RevisionRun) => {
      if (running(r)) return undefined;
      const slot = this.slot(w, r.memoryMb, { replacing: true });
      if (slot && isRefusal(slot)) {
        for (const l of unused) l.release();
        throw new ReplicaQuotaError(slot);
      }
      if (slot) unused.add(slot);
      return slot;
    };
    const slots = [slotFor(run), canary ? slotFor(canary.run) : undefined];
    const make = async (k: string, r: RevisionRun, slot: Lease | undefined): Promise<Workload> => {
      if (slot) unused.delete(slot);
      const kept = reuse(r);
      if (kept?.replicas.some((x) => !x.gone)) {
        slot?.release();
        return kept;
      }
      const fresh = await this.withLeftovers(w, k, r, cur?.seq ?? 0);
      if (fresh.replicas.length === 0) fresh.replicas.push(await this.startReplica(fresh, slot));
      else slot?.release();
      if (cur) cur.seq = Math.max(cur.seq, fresh.seq);
      return fresh;
    };
    let primary: Workload;
    let second: Workload | undefined;
    try {
      primary = await make(key, run, slots[0]);
      second = canary ? await make(`${key}#canary`, canary.run, slots[1]) : undefined;
    } finally {
      for (const l of unused) l.release();
    }
    primary.key = key;
    primary.public = w.public;
    primary.route = w.route;
    primary.canary = second ? { w: second, percent: canary?.percent ?? 0 } : undefined;
    if (second) {
      second.key = `${key}#canary`;
      second.public = w.public;
      second.route = w.route;
      second.canary = undefined;
    }
    this.workloads.set(key, primary);
    const keep = new Set([primary, second]);
    await Promise.all(
      pool.filter((x) => !keep.has(x)).flatMap((x) => x.replicas.map((r) => this.removeReplica(r))),
    );
    await this.dropLeftovers(key);
  }

  /** A workload of `run` under `key`, holding the replicas of it an earlier server left running. */
  private async withLeftovers(
    w: Pick<Workload, 'workspace' | 'kind' | 'name' | 'public' | 'route'>,
    key: string,
    run: RevisionRun,
    seq: number,
  ): Promise<Workload> {
    const out: Workload = { ...w, key, run, replicas: [], extraStarts: 0, waiting: 0, seq };
    out.replicas.push(...(await this.claimLeftovers(out)));
    return out;
  }

  /**
   * Serves `run` (and `canary`) again with the earlier server's replicas of them, starting none: after a restart
   * in the middle of a redeploy (or after a failed one), the revisions that served before it serve on while the
   * new one is built (decision 029). Returns whether any replica of `run` was taken over.
   */
  async readopt(
    w: Pick<Workload, 'workspace' | 'kind' | 'name' | 'public' | 'route'>,
    run: RevisionRun,
    canary?: { run: RevisionRun; percent: number },
  ): Promise<boolean> {
    const key = workloadKey(w.workspace, w.kind, w.name);
    if (this.workloads.has(key)) return false;
    const primary = await this.withLeftovers(w, key, run, 0);
    if (primary.replicas.length === 0) return false;
    if (canary) {
      const second = await this.withLeftovers(w, `${key}#canary`, canary.run, 0);
      if (second.replicas.length > 0) primary.canary = { w: second, percent: canary.percent };
    }
    // A deploy may have taken the name while the claims ran: it wins, and the claimed replicas go.
    if (this.workloads.has(key)) {
      await Promise.all(
        [primary, primary.canary?.w].flatMap((x) => x?.replicas.map((r) => this.removeReplica(r)) ?? []),
      );
      return false;
    }
    this.workloads.set(key, primary);
    return true;
  }

  /** Removes every replica of the workload and forgets it. */
  async remove(workspace: string, kind: string, name: string): Promise<void> {
    const key = workloadKey(workspace, kind, name);
    const w = this.workloads.get(key);
    this.workloads.delete(key);
    const all = w ? [...w.replicas, ...(w.canary?.w.replicas ?? [])] : [];
    await Promise.all(all.map((r) => this.removeReplica(r)));
    await this.dropLeftovers(key);
  }

  /**
   * acquire's answer when it needs no start, found without a promise (the gateway's hot path): the least busy
   * live replica when it is below `target` in flight or no other may start now; else undefined.
   */
  ready(w: Workload, target: number): Replica | undefined {
    let best: Replica | undefined;
    let live = 0;
    for (const r of w.replicas) {
      if (r.gone) continue;
      live++;
      if (!best || r.inflight < best.inflight) best = r;
    }
    return best && (best.inflight < target || live >= w.run.maxScale || w.starting) ? best : undefined;
  }

  /**
   * A replica to send one request to: the least busy one below `target` in flight, else a new one while under
   * maxScale (one start at a time), else the least busy. Starts one from zero; throws 503 when that fails.
   */
  async acquire(w: Workload, target: number): Promise<Replica> {
    const ready = this.ready(w, target);
    if (ready) return ready;
    const live = w.replicas.filter((r) => !r.gone);
    let best: Replica | undefined;
    for (const r of live) if (!best || r.inflight < best.inflight) best = r;
    if (best && (best.inflight < target || live.length >= w.run.maxScale || w.starting)) return best;
    if (!w.starting) {
      const slot = this.slot(w, w.run.memoryMb);
      if (slot && isRefusal(slot)) {
        this.noteCapped(w, live.length, slot);
        if (!best)
          throw new ApiError(
            'QUOTA_EXCEEDED',
            `${w.kind.toLowerCase()} ${JSON.stringify(w.name)} has no replica running and none may start: ${slot.message}`,
            { headers: { 'retry-after': '1' } },
          );
        return best;
      }
      w.starting = this.startReplica(w, slot)
        .then((r) => {
          if (this.current(w)) w.replicas.push(r);
          else void this.removeReplica(r);
          return r;
        })
        .finally(() => {
          w.starting = undefined;
        });
      // Served by a busy replica meanwhile, no request waits for this start: its failure is said here.
      w.starting.catch((err) => {
        if (err instanceof ReplicaQuotaError) this.noteCapped(w, live.length, err.refusal);
        else this.deps.logger?.warn({ err, workload: w.key }, 'starting a replica failed');
      });
    }
    if (best) return best;
    try {
      return await w.starting;
    } catch (err) {
      if (err instanceof ReplicaQuotaError) {
        this.noteCapped(w, live.length, err.refusal);
        throw new ApiError(
          'QUOTA_EXCEEDED',
          `${w.kind.toLowerCase()} ${JSON.stringify(w.name)} has no replica running and none may start: ${err.message}`,
          { headers: { 'retry-after': '1' } },
        );
      }
      throw new ApiError(
        'UNAVAILABLE',
        `${w.kind.toLowerCase()} ${JSON.stringify(w.name)} could not start a replica: ${(err as Error).message}`,
        {
          headers: { 'retry-after': '1' },
        },
      );
    }
  }

  /**
   * Starts replicas until `desired` are live or starting (the autoscaler's scale-out), never past maxScale.
   * Failures are logged: the next decision asks again.
   */
  scaleOut(w: Workload, desired: number): number {
    const live = w.replicas.filter((r) => !r.gone).length;
    const want = Math.min(desired, w.run.maxScale) - live - w.extraStarts;
    let started = 0;
    for (let i = 0; i < want; i++) {
      // Capped by the workspace's quotas: the replicas running take the load, and the object says why.
      const slot = this.slot(w, w.run.memoryMb);
      if (slot && isRefusal(slot)) {
        this.noteCapped(w, live + w.extraStarts, slot);
        break;
      }
      started++;
      w.extraStarts++;
      this.startReplica(w, slot)
        .then((r) => {
          if (this.current(w)) w.replicas.push(r);
          else void this.removeReplica(r);
        })
        .catch((err) => {
          // Another node took the workspace's last room first: held as when this node's count says so.
          if (err instanceof ReplicaQuotaError) this.noteCapped(w, live, err.refusal);
          else this.deps.logger?.warn({ err, workload: w.key }, 'scaling out failed');
        })
        .finally(() => {
          w.extraStarts--;
        });
    }
    return started;
  }

  /**
   * A slot for one more replica of `w` in its workspace's quotas: a lease, a refusal, or undefined when no quotas
   * are kept. `replacing`: the workload's own replicas do not count (a deploy replaces them); `force`: the replica
   * runs already (re-adopted), so it is counted whatever the limits say.
   */
  private slot(
    w: Pick<Workload, 'workspace' | 'kind' | 'name' | 'capped'>,
    memoryMb: number,
    opts: { replacing?: boolean; force?: boolean } = {},
  ): Lease | Refusal | undefined {
    if (!this.deps.quota) return undefined;
    const owner = workloadKey(w.workspace, w.kind, w.name);
    const take = () =>
      this.deps.quota!.take(w.workspace, 'replicas', memoryMb, {
        owner,
        excludeOwner: opts.replacing ? owner : undefined,
        force: opts.force,
      });
    let got = take();
    // A scaled-to-zero replica kept frozen holds its slot as a sandbox in standby does, but gives it up rather
    // than stand in the way of one that is to serve now.
    if (isRefusal(got) && this.giveUpKept(w.workspace)) got = take();
    if (!isRefusal(got)) w.capped = undefined;
    return got;
  }

  /** Removes the workspace's replicas kept frozen at scale to zero, their slots freed now; whether there were any. */
  private giveUpKept(workspace: string): boolean {
    let any = false;
    for (const w of this.all()) {
      if (w.workspace !== workspace) continue;
      for (const r of w.replicas) {
        if (!keptInStandby(r)) continue;
        any = true;
        w.replicas = w.replicas.filter((x) => x !== r);
        r.gone = true;
        this.deps.instances.free(r.id);
        const message = `replica ${r.id} removed from standby: its slot was needed by a replica starting in the workspace`;
        this.deps.logger?.info({ workspace, name: w.name, replica: r.id }, message);
        this.deps.onEvent?.(w, message);
        void this.removeReplica(r);
      }
    }
    return any;
  }

  /** Says once (until a replica may start again) that `w` is held at `count` replicas, and by which quota. */
  private noteCapped(w: Workload, count: number, r: Refusal) {
    const by =
      r.quota === 'memoryMb'
        ? `the workspace's memory quota (${r.limit} MB, ${r.used} MB in use)`
        : `the workspace's ${r.quota} quota (${r.limit})`;
    const message = `replicas capped at ${count} by ${by}`;
    if (w.capped === message) return;
    w.capped = message;
    this.deps.logger?.info({ workspace: w.workspace, name: w.name, quota: r.quota }, message);
    this.deps.onEvent?.(w, message);
  }

  /** The workload (or canary) is still the one serving its name. */
  private current(w: Workload): boolean {
    for (const x of this.all()) if (x === w) return true;
    return false;
  }

  /**
   * A replica the gateway found dead (its port refused the connection): taken out at once, so no request picks it
   * again, then said on the workload's object with what ended it, and removed.
   */
  async crashed(w: Workload, r: Replica): Promise<void> {
    if (r.gone) return;
    w.replicas = w.replicas.filter((x) => x !== r);
    r.gone = true;
    const why = await this.endOf(w, r).catch((err) => `what ended it could not be read (${err.message})`);
    const message = `replica ${r.id} crashed: ${why}. It was removed; a new one starts when requests need it`;
    this.deps.logger?.warn({ workspace: w.workspace, name: w.name, replica: r.id }, message);
    this.deps.onEvent?.(w, message);
    await this.removeReplica(r);
  }

  /** What ended a replica: its start command's exit and last output, or its sandbox's end. */
  private async endOf(w: Workload, r: Replica): Promise<string> {
    const p = await Promise.race([
      this.deps.instances
        .daemon(r.info)
        .process(APP_PROCESS)
        .catch(() => undefined),
      new Promise<undefined>((res) => setTimeout(res, CRASH_READ_MS)),
    ]);
    if (p?.status === 'running') return `its app runs but refused connections on port ${portOf(w.run)}`;
    if (p) {
      const out = lastOutput(p.logs, CRASH_OUTPUT_LINES);
      return (
        `its start command (${w.run.start}) ended (${p.status}, exit code ${p.exitCode})` +
        (out ? `; its last output: ${JSON.stringify(out)}` : ', printing nothing')
      );
    }
    const info = await this.deps.instances.driver.inspect(r.id);
    if (info?.state !== 'dead') return 'its sandbox no longer answers';
    const oom = info.ended?.oomKills
      ? `, ${info.ended.oomKills} of its processes by the out-of-memory killer (its memory is ${w.run.memoryMb} MB)`
      : '';
    const out = lastOutput(await this.deps.instances.driver.daemonLog(r.id).catch(() => undefined));
    return `its sandbox ended${oom}${out ? `; its daemon's last output: ${JSON.stringify(out)}` : ''}`;
  }

  /** Removes one replica (scale in); keeps the workload. */
  async scaleIn(w: Workload, r: Replica): Promise<void> {
    w.replicas = w.replicas.filter((x) => x !== r);
    await this.removeReplica(r);
  }

  /** The sandbox a replica of `w` runs in (the same for every replica of a revision and spec). */
  private specOf(w: Workload): SandboxSpec {
    const run = w.run;
    const envs = {
      ...run.envs,
      PORT: String(portOf(run)),
      HOST: '0.0.0.0',
      BL_SERVER_PORT: String(portOf(run)),
      BL_SERVER_HOST: '0.0.0.0',
      BL_WORKSPACE: w.workspace,
      BL_NAME: w.name,
      PATH: run.path ?? APP_PATH,
    };
    return {
      memoryMb: run.memoryMb,
      pidsMax: APP_PIDS_MAX,
      cpuShares: defaultCpuShares(run.memoryMb),
      diskMb: run.memoryMb,
      envs,
      image: run.image ?? APP_IMAGE,
      // An app built from a Dockerfile is its image: nothing is bound over it (decision 051).
      volumes: [
        ...(run.appDir ? [{ hostPath: run.appDir, mountPath: APP_DIR, readOnly: true }] : []),
        ...run.volumes,
      ],
      ...(run.egress ? { egress: run.egress } : {}),
    };
  }

  /** Starts one replica in the slot given (released if the start fails). */
  private async startReplica(w: Workload, lease: Lease | undefined): Promise<Replica> {
    const run = w.run;
    const id = `${replicaIdPrefix(w.key, run.id)}${++w.seq}`;
    const spec = this.specOf(w);
    const { instances } = this.deps;
    const owner = { kind: w.kind, workspace: w.workspace, name: w.name, role: 'replica' as const };
    // In a cluster the slot is judged once more by the database, against every node's replicas (decision 092).
    const refused = await lease?.admitted;
    if (refused) throw new ReplicaQuotaError(refused);
    const { info, daemon } = await instances.start({ id, spec, owner, lease });
    try {
      const p = await daemon.start({
        command: run.start,
        name: APP_PROCESS,
        ...(run.appDir ? { workingDir: APP_DIR } : {}),
        env: spec.envs,
        waitForPorts: [portOf(run)],
        timeout: 0,
      });
      if (p.status !== 'running')
        throw new ReplicaStartError(
          `the start command (${run.start}) exited with code ${p.exitCode} before listening on port ${portOf(run)}:\n${p.logs.trimEnd().split('\n').slice(-20).join('\n')}`,
        );
    } catch (err) {
      await instances.remove(id).catch(() => undefined);
      throw err;
    }
    this.deps.logger?.info({ workspace: w.workspace, name: w.name, replica: id }, 'replica ready');
    return { id, revision: run.id, info, inflight: 0, lastUsedMs: this.now(), gone: false };
  }

  private async removeReplica(r: Replica): Promise<void> {
    r.gone = true;
    await this.deps.instances
      .remove(r.id)
      .catch((err) => this.deps.logger?.warn({ err, replica: r.id }, 'removing a replica failed'));
  }

  /**
   * Holds replicas an earlier server left running (the garbage collector kept them: a workload still runs their
   * revision) for that workload's next deploy to take over; those still unclaimed after LEFTOVER_CLAIM_MS go.
   */
  holdLeftovers(left: SandboxInfo[]): void {
    for (const info of left) this.leftovers.set(info.id, info);
    if (this.leftovers.size > 0) setTimeout(() => void this.dropLeftovers(), LEFTOVER_CLAIM_MS).unref();
  }

  /**
   * Takes over the earlier server's replicas of this key and revision whose sandbox has exactly the spec a new
   * one would get (same memory, envs, app, volumes) and whose start command still runs; the rest are removed.
   */
  private async claimLeftovers(w: Workload): Promise<Replica[]> {
    const prefix = replicaIdPrefix(w.key, w.run.id);
    const spec = specHash(this.specOf(w));
    const out: Replica[] = [];
    for (const [id, info] of [...this.leftovers]) {
      if (!id.startsWith(prefix)) continue;
      this.leftovers.delete(id);
      w.seq = Math.max(w.seq, Number(id.slice(prefix.length)) || 0);
      try {
        // Its processes trust the TLS interception CA of the server that started it, and this server holds another
        // (CA keys live in memory only, runtime/egress/ca.ts): requests to its connections' API hosts would fail.
        if (w.run.egress?.routing?.length)
          throw new Error('its processes trust the interception CA of an earlier server');
        const { instances } = this.deps;
        const now = await instances.driver.inspect(id);
        if (!now || now.state === 'dead' || now.specHash !== spec || now.pid !== info.pid)
          throw new Error('the sandbox is gone or runs another spec');
        // Awake while adopted: the gateway's activator starts every replica as running and freezes it again
        // after the standby delay.
        if (now.state === 'frozen') await instances.driver.thaw(id);
        const p = await instances.daemon(now).process(APP_PROCESS);
        if (p?.status !== 'running') throw new Error('the start command no longer runs');
        this.deps.logger?.info({ workspace: w.workspace, name: w.name, replica: id }, 'replica re-adopted');
        const lease = this.slot(w, w.run.memoryMb, { force: true });
        if (lease && !isRefusal(lease)) instances.hold(id, lease);
        out.push({
          id,
          revision: w.run.id,
          info: { ...now, state: 'running' },
          inflight: 0,
          lastUsedMs: this.now(),
          gone: false,
        });
      } catch (err) {
        this.deps.logger?.info({ replica: id, reason: (err as Error).message }, 'leftover replica removed');
        await this.deps.instances.remove(id).catch(() => undefined);
      }
    }
    return out;
  }

  /** Removes the leftovers no deploy took (of one workload key and its canary, or all). */
  private async dropLeftovers(key?: string): Promise<void> {
    const prefixes = key && [key, `${key}#canary`].map((k) => replicaIdPrefix(k, '').slice(0, -1));
    for (const id of [...this.leftovers.keys()]) {
      if (prefixes && !prefixes.some((p) => id.startsWith(p))) continue;
      this.leftovers.delete(id);
      await this.deps.instances.remove(id).catch(() => undefined);
    }
  }
}
