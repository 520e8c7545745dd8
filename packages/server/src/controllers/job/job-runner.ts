// Runs job executions: keeps every unfinished execution in memory (loaded from the store at start), starts
// waiting tasks as job-decide.ts picks them, and writes every task transition to the store before acting on it,
// guarded by the attempt number, so a kill -9 of the server can neither lose a task nor count it twice. At start,
// an attempt whose sandbox still runs is re-adopted; one whose sandbox is gone runs again (not counted as a retry).
// Each running task holds a slot of its workspace's quotas (decision 040): beyond them its tasks stay queued, and
// the job's object says so, so no workspace takes every slot of the server's pool.
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { Builder } from '../../builds/builder.js';
import { DEFAULT_JOB_MAX_TASKS } from '../../config.js';
import type { Resources } from '../../store/resources.js';
import { isPersistentJobVolume } from '../../kinds/job.js';
import type { Load } from '../../cluster/placement.js';
import { isRefusal, type Lease, type QuotaLedger } from '../core/quota-ledger.js';
import { judge, memoryInUse, type Refusal } from '../core/quotas.js';
import type { ResourceKey, StoredObject } from '../../store/store.js';
import {
  afterAttempt,
  countTasks,
  type ExecutionStatus,
  executionStatus,
  isExecutionEnded,
  isTaskDone,
  pickStarts,
  type Room,
  type TaskStatus,
} from './job-decide.js';
import { issueCredential, revokeOps, type TaskCredential } from './job-credential.js';
import type { FollowedTask } from './job-log-follow.js';
import {
  type AttemptResult,
  adoptAttempt,
  attemptOf,
  runAttempt,
  stopAttempt,
  TASK_ID_PREFIX,
  type TaskDeps,
} from './job-task.js';
import {
  type AttemptReport,
  type ExecutionRecord,
  EXECUTION_KIND,
  execKey,
  type TaskRecord,
  TASK_KIND,
  taskKey,
  tasksParent,
} from './job-store.js';
import { EVERY_WORKSPACE } from '../../store/store.js';
import { lostOnNode } from '../core/lost-node.js';
import { restoreLog, storeLogOp, taskLogKey } from './job-task-logs.js';

/** A credential issued for tasks stays valid at least this long beyond the longest attempt (the kill grace, slack). */
export const CREDENTIAL_MARGIN_MS = 60_000;
/** Tasks running at once on this server, all executions together (BERTH_JOB_MAX_TASKS): sandboxes cost memory. */
export const DEFAULT_GLOBAL_MAX_TASKS = DEFAULT_JOB_MAX_TASKS;
/** How often waiting retries are looked at (their backoff elapses without any other event). */
export const TICK_MS = 200;
/** After a cancel's SIGTERM, the sandbox is removed (SIGKILL of everything) this long after, whatever runs. */
export const CANCEL_KILL_MS = 7_000;

interface LiveTask {
  index: number;
  status: TaskStatus;
  attempts: number;
  lost: number;
  notBeforeMs?: number;
  sandbox?: string;
  input: unknown;
  /** Its slot in the workspace's quotas, from its pick until its instance holds it (runtime/instances.ts). */
  lease?: Lease;
  /** In a cluster: the node its attempt is placed on, from its pick until the attempt's outcome is stored. */
  node?: string;
}

/** An attempt running on a node of the cluster (maybe this one's), awaited from that node's report. */
interface RemoteAttempt {
  x: LiveExecution;
  t: LiveTask;
  attempt: number;
  node: string;
  sandbox: string;
}

/** How an attempt ended, as the runner records it. */
interface Outcome {
  exitCode: number;
  timedOut: boolean;
  logs: string;
  /** It could not run (infrastructure): the attempt counts as failed. */
  error?: string;
  /** The node it ran on died: the attempt counts as failed, and its condition names the node. */
  lostOn?: string;
}

/**
 * Where a cluster's job tasks run (decision 093): each attempt is placed on a node, which runs it
 * (job-holding.ts) and reports its end on the task.
 */
export interface TaskNodes {
  /**
   * The node an attempt of a job of `region` goes to, among those `room` accepts (placement.ts
   * least loaded, `tasks` adding the runner's own tasks to each node's load); undefined when none can take it now.
   */
  place(
    region: string | undefined,
    tasks: (node: string) => Load,
    room: (node: string) => boolean,
  ): string | undefined;
  /** Whether the node's lease lapsed (it died, or was cut from the database): its attempts are lost. */
  lapsed(node: string): boolean;
  /** Whether the node may take an attempt now (its lease held, not drained). */
  usable(node: string): boolean;
  /** The nodes holding the data of the workspace's volumes `names` (decision 102; VolumeNodes.nodesOf). */
  volumeNodes(workspace: string, names: readonly string[]): string[];
  /** Nodes that may take tasks now (each runs up to maxTasks). */
  count(): number;
}

interface LiveExecution {
  key: ResourceKey;
  rec: ExecutionRecord;
  tasks: LiveTask[];
  running: number;
  cancelling: boolean;
  /** Berth's own time around attempts (not the driver's), for the `job execution ended` log and bench/jobs. */
  overhead: { ms: number; attempts: number };
  /** The tasks' credential this server issued (plaintext in memory only), or its issuing in progress. */
  cred?: Promise<TaskCredential>;
  /** Its tasks wait for the workspace's quotas, and the job's object says so (once, until one starts). */
  held?: boolean;
  /** Its app is built on this server (undefined: not looked yet; false: it waits, and the job's object said so). */
  appHere?: boolean;
  /**
   * The job's region, and the persistent volumes its tasks mount: they run on the node holding the volumes' data
   * (decision 102), or on the leader, which makes a volume not made yet.
   */
  region?: string;
  volumes?: string[];
  /** Its ready tasks wait for a node of its region, and the job's object says so (once, until one starts). */
  noNode?: boolean;
}

export interface JobRunnerDeps extends TaskDeps {
  resources: Resources;
  builder: Pick<Builder, 'builtByKey'>;
  /**
   * Builds an execution's app again on this server (job-rebuild.ts), asked when its tasks find it missing; a
   * rejection (its message says why) ends one attempt of each task waiting for it, per the job's retry policy.
   * None: the tasks wait until something else builds it.
   */
  rebuild?: (workspace: string, job: string, app: string, signal: AbortSignal) => Promise<void>;
  logsDir: string;
  logger?: Logger;
  maxTasks?: number;
  /** The workspaces' task slots and memory (decision 040); none: the server's pool only. */
  quota?: QuotaLedger;
  now?: () => number;
  /** This server's node in a cluster (none on SQLite): recorded on each attempt, named when another loses it. */
  node?: string;
  /** In a cluster, where attempts run (decision 093); none: every attempt runs here (SQLite). */
  nodes?: TaskNodes;
  /** Told when an execution ends (callbacks). */
  onFinished?: (workspace: string, rec: ExecutionRecord, stats: Record<string, number>) => void;
}

export class JobRunner {
  private readonly live = new Map<string, LiveExecution>();
  private readonly now: () => number;
  private readonly maxTasks: number;
  private readonly stopping = new AbortController();
  private timer?: NodeJS.Timeout;
  private runningTotal = 0;
  /**
   * Nothing is launched until `start` has run (after the instances' garbage collector removed the task sandboxes no
   * execution accounts for, main.ts): an attempt launched before that would have its fresh sandbox removed as one.
   */
  private started = false;
  private readonly removing = new Set<Promise<unknown>>();
  /** Apps being built again here for their executions (`<workspace>\0<app>`). */
  private readonly rebuilding = new Set<string>();
  /** Attempts running on nodes, by `<workspace>/<job>/<id>#<index>`. */
  private readonly remote = new Map<string, RemoteAttempt>();
  /** What this runner placed on each node and is running there. */
  private readonly onNode = new Map<string, Load>();
  private unwatch?: () => void;

  constructor(private readonly deps: JobRunnerDeps) {
    this.now = deps.now ?? Date.now;
    this.maxTasks = deps.maxTasks ?? DEFAULT_GLOBAL_MAX_TASKS;
  }

  private get store() {
    return this.deps.resources.store;
  }

  /** The workspaces' quotas the tasks run under (an execution asking for more memory than its quota is refused). */
  get quota(): QuotaLedger | undefined {
    return this.deps.quota;
  }

  /**
   * Loads unfinished executions and re-adopts or re-runs their running attempts. Task instances no execution
   * accounts for were removed before (jobOwner, by the instances' garbage collector), so nothing starts until then.
   */
  async start(): Promise<void> {
    const execs = await this.store.list({ workspace: EVERY_WORKSPACE, kind: EXECUTION_KIND });
    execs.sort((a, b) => String(a.body.createdAt).localeCompare(String(b.body.createdAt)));
    for (const o of execs) {
      const rec = o.body as ExecutionRecord;
      if (isExecutionEnded(rec.status)) continue;
      const x = await this.load(o);
      for (const t of x.tasks) {
        if (t.status !== 'running' || !t.sandbox) continue;
        if (this.deps.nodes && t.node) {
          // Running on a node (maybe this one): awaited from its report, or lost once its lease lapsed.
          this.occupy(x, t, true);
          this.count(x, t.node, 1);
          this.await(x, t, t.node);
          continue;
        }
        const info = await this.deps.instances.driver.inspect(t.sandbox);
        if (info && info.state !== 'dead') {
          this.occupy(x, t, true);
          if (t.lease) this.deps.instances.hold(t.sandbox, t.lease);
          t.lease = undefined;
          void this.follow(x, t, t.attempts, t.sandbox, 'adopt');
        } else await this.lose(x, t);
      }
      if (x.cancelling) void this.cancel(x.key.workspace, rec.job, rec.id);
      // A server killed between an execution's last outcome and its end leaves it with nothing left to run.
      else await this.settle(x);
    }
    this.started = true;
    if (this.deps.nodes) {
      this.unwatch = this.store.watch((c) => {
        if (c.object.kind === TASK_KIND && c.type !== 'DELETED') this.reported(c.object);
      });
      // A report stored before the watch began (a leader taking over) is read once.
      for (const r of [...this.remote.values()]) {
        const o = await this.store.get(taskKey(r.x.key.workspace, r.x.rec.job, r.x.rec.id, r.t.index));
        if (o) this.reported(o);
      }
    }
    this.timer = setInterval(() => this.schedule(), TICK_MS);
    this.timer.unref();
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.unwatch?.();
    if (this.timer) clearInterval(this.timer);
    await Promise.all([...this.removing]);
  }

  private async load(o: StoredObject): Promise<LiveExecution> {
    const rec = o.body as ExecutionRecord;
    const tasks = (
      await this.store.list({ kind: TASK_KIND, workspace: o.workspace, parent: tasksParent(rec.job, rec.id) })
    )
      .map((t) => t.body as TaskRecord)
      .sort((a, b) => a.index - b.index)
      .map((t) => ({
        index: t.index,
        status: t.status,
        attempts: t.attempts,
        lost: t.lost ?? 0,
        sandbox: t.sandbox,
        node: this.deps.nodes && t.status === 'running' ? t.node : undefined,
        input: t.input,
        notBeforeMs: t.notBefore ? Date.parse(t.notBefore) : undefined,
      }));
    const job = this.deps.nodes
      ? await this.store.get({ kind: 'Job', workspace: o.workspace, parent: '', name: rec.job })
      : undefined;
    const x: LiveExecution = {
      key: execKey(o.workspace, rec.job, rec.id),
      rec,
      tasks,
      running: 0,
      cancelling: rec.status === 'cancelling',
      overhead: { ms: 0, attempts: 0 },
      region: typeof job?.body.spec?.region === 'string' ? job.body.spec.region : undefined,
      volumes: (job?.body.spec?.volumes ?? [])
        .filter(isPersistentJobVolume)
        .map((v: { name: string }) => v.name),
    };
    this.live.set(`${o.workspace}/${rec.job}/${rec.id}`, x);
    return x;
  }

  /** Ids of the job's unfinished executions. */
  running(workspace: string, job: string): string[] {
    return [...this.live.values()]
      .filter((x) => x.key.workspace === workspace && x.rec.job === job)
      .map((x) => x.rec.id);
  }

  /** A task of an unfinished execution as the runner holds it (log following); undefined once it has ended. */
  taskState(workspace: string, job: string, id: string, index: number): FollowedTask | undefined {
    const t = this.live.get(`${workspace}/${job}/${id}`)?.tasks[index];
    return (
      t && {
        status: t.status,
        attempts: t.attempts,
        sandbox: t.sandbox,
        node: t.node && t.node !== this.deps.node ? t.node : undefined,
      }
    );
  }

  /** The daemon socket of a task's sandbox while it runs. */
  async socketOf(sandbox: string): Promise<string | undefined> {
    const info = await this.deps.instances.driver.inspect(sandbox);
    return info && info.state !== 'dead' ? info.socketPath : undefined;
  }

  /** Starts tracking a freshly created execution (its objects are already in the store). */
  async track(o: StoredObject): Promise<void> {
    await this.load(o);
    this.schedule();
  }

  /** Cancels: waiting tasks are cancelled at once, running ones get SIGTERM, then their sandboxes go. */
  async cancel(workspace: string, job: string, id: string): Promise<boolean> {
    const x = this.live.get(`${workspace}/${job}/${id}`);
    if (!x) return false;
    x.cancelling = true;
    const waiting = x.tasks.filter((t) => t.status === 'pending');
    for (const t of waiting) t.status = 'cancelled';
    const at = new Date(this.now()).toISOString();
    await this.store.write([
      ...waiting.map((t) => ({
        op: 'update' as const,
        key: taskKey(workspace, job, id, t.index),
        mutate: (cur: StoredObject) => ({ ...cur.body, status: 'cancelled', completedAt: at, updatedAt: at }),
      })),
      {
        op: 'update',
        key: x.key,
        mutate: (cur: StoredObject) => ({ ...cur.body, status: 'cancelling', updatedAt: at }),
      },
    ]);
    for (const t of x.tasks) {
      // One running on a node is stopped there (job-holding.ts sees the execution cancelling).
      if (t.status !== 'running' || !t.sandbox || t.node) continue;
      const sandbox = t.sandbox;
      void stopAttempt(this.deps, sandbox).catch(() => undefined);
      setTimeout(
        () => void this.deps.instances.remove(sandbox).catch(() => undefined),
        CANCEL_KILL_MS,
      ).unref();
    }
    await this.settle(x);
    return true;
  }

  /** Cancels every unfinished execution of a job (the job is being deleted: nothing of it may keep running). */
  async cancelAll(workspace: string, job: string): Promise<void> {
    for (const id of this.running(workspace, job)) await this.cancel(workspace, job, id);
  }

  /** Starts whatever the caps allow now. */
  schedule(): void {
    if (this.stopping.signal.aborted || !this.started) return;
    this.lostNodes();
    const execs = [...this.live.values()].filter((x) => !x.cancelling && this.hasApp(x));
    // In a cluster, each node runs up to maxTasks.
    const nodes = this.deps.nodes;
    const capacity = nodes ? this.maxTasks * Math.max(1, nodes.count()) : this.maxTasks;
    const held = new Set<string>();
    const picks = pickStarts(
      execs.map((x) => ({
        id: `${x.key.workspace}/${x.rec.job}/${x.rec.id}`,
        maxConcurrent: x.rec.maxConcurrentTasks,
        running: x.running,
        waiting: x.tasks.filter((t) => t.status === 'pending'),
        room: this.deps.quota ? x.key.workspace : undefined,
        taskMemoryMb: x.rec.memoryMb,
      })),
      capacity - this.runningTotal,
      this.now(),
      this.rooms(execs),
      held,
    );
    for (const p of picks) {
      const x = this.live.get(p.execution);
      const t = x?.tasks[p.index];
      if (!x || !t) continue;
      if (!this.occupy(x, t)) continue;
      if (nodes && !this.placeOn(x, t, nodes)) {
        this.vacate(x, t);
        continue;
      }
      // Claimed in memory at once, so the next pick (before the store write lands) does not take it again.
      t.status = 'running';
      x.held = false;
      void this.launch(x, t, performance.now());
    }
    for (const id of held) {
      const x = this.live.get(id);
      if (x && !x.held) this.noteHeld(x);
    }
  }

  /**
   * Whether the app the execution runs is built on this server. A server that took over the lead of a cluster builds
   * a job's app again from its source (every server keeps a copy: builds/code-copies.ts); until then the tasks wait,
   * rather than spend an attempt on an app that is not here yet.
   */
  private hasApp(x: LiveExecution): boolean {
    // In a cluster the node running an attempt builds the app itself when it lacks it (job-holding.ts).
    if (x.appHere || this.deps.nodes) return true;
    const said = x.appHere === false;
    x.appHere = this.deps.builder.builtByKey(x.key.workspace, x.rec.app) !== undefined;
    if (!x.appHere && !said) {
      const job = { kind: 'Job', workspace: x.key.workspace, parent: '', name: x.rec.job };
      void this.deps.resources
        .recordEvent(
          job,
          `execution ${x.rec.id}: its tasks wait for app ${x.rec.app} to be built on this server`,
        )
        .catch((err) => this.deps.logger?.warn({ err, execution: x.rec.id }, 'could not record an app wait'));
    }
    if (!x.appHere) this.rebuild(x);
    return x.appHere;
  }

  /**
   * Builds the execution's app here, once at a time per app, when one of its waiting tasks may start (a task whose
   * attempt a failed build ended waits out its backoff first, so the build is tried again at the retry's pace).
   */
  private rebuild(x: LiveExecution): void {
    const { rebuild } = this.deps;
    const id = `${x.key.workspace}\0${x.rec.app}`;
    if (!rebuild || this.rebuilding.has(id) || x.cancelling) return;
    const now = this.now();
    if (!x.tasks.some((t) => t.status === 'pending' && (t.notBeforeMs ?? 0) <= now)) return;
    this.rebuilding.add(id);
    void rebuild(x.key.workspace, x.rec.job, x.rec.app, this.stopping.signal)
      .then(
        () => undefined,
        (err) => (this.stopping.signal.aborted ? undefined : this.appFailed(x.key.workspace, x.rec.app, err)),
      )
      .catch((err) => this.deps.logger?.warn({ err, app: x.rec.app }, 'could not record a failed app build'))
      .finally(() => {
        this.rebuilding.delete(id);
        this.schedule();
      });
  }

  /**
   * The app could not be built here: each task waiting for it (and not in its backoff) spends an attempt, as a
   * failed process would — retried after its backoff while the job's maxRetries allow, else failed — and the job's
   * object says why. The executions whose tasks all ended end.
   */
  private async appFailed(workspace: string, app: string, err: unknown): Promise<void> {
    const why = `app ${app} could not be built on this server: ${(err as Error).message}`;
    this.deps.logger?.warn(
      { workspace, app, err: (err as Error).message },
      'a job execution app could not be built',
    );
    const now = this.now();
    const at = new Date(now).toISOString();
    for (const x of [...this.live.values()]) {
      if (x.key.workspace !== workspace || x.rec.app !== app || x.cancelling || x.appHere) continue;
      const due = x.tasks.filter((t) => t.status === 'pending' && (t.notBeforeMs ?? 0) <= now);
      if (!due.length) continue;
      const ends = due.map((t) => {
        const attempt = t.attempts + 1;
        const next = afterAttempt(
          { exitCode: -1, timedOut: false, cancelled: false },
          attempt - t.lost,
          x.rec.maxRetries,
          now,
        );
        return { t, attempt, next };
      });
      await this.store.write(
        ends.map(({ t, attempt, next }) => ({
          op: 'update' as const,
          key: taskKey(workspace, x.rec.job, x.rec.id, t.index),
          mutate: (cur: StoredObject) => {
            if (cur.body.status !== 'pending' || cur.body.attempts !== t.attempts)
              throw new Error('task moved on');
            return {
              ...cur.body,
              status: next.status,
              attempts: attempt,
              notBefore: next.notBeforeMs ? new Date(next.notBeforeMs).toISOString() : undefined,
              completedAt: isTaskDone(next.status) ? at : undefined,
              updatedAt: at,
              conditions: [
                ...(cur.body.conditions ?? []),
                { type: 'Attempt', reason: 'build-failed', message: `attempt ${attempt}: ${why}` },
              ].slice(-10),
            };
          },
        })),
      );
      for (const { t, attempt, next } of ends) {
        this.keepLog(x, t.index, attempt, `(no output: ${why})\n`);
        t.attempts = attempt;
        t.status = next.status;
        t.notBeforeMs = next.notBeforeMs;
      }
      const failed = ends.filter((e) => isTaskDone(e.next.status)).length;
      await this.deps.resources
        .recordEvent(
          { kind: 'Job', workspace, parent: '', name: x.rec.job },
          `execution ${x.rec.id}: ${why}; ${ends.length} waiting task(s) spent an attempt${failed ? `, ${failed} of them failed (no retry left)` : ', retried after their backoff'}`,
        )
        .catch((e) =>
          this.deps.logger?.warn({ err: e, execution: x.rec.id }, 'could not record an app failure'),
        );
      await this.settle(x);
    }
  }

  /** What each workspace with executions here may still start, by its quotas. */
  private rooms(execs: LiveExecution[]): Map<string, Room> {
    const out = new Map<string, Room>();
    const q = this.deps.quota;
    if (!q) return out;
    for (const x of execs) {
      const ws = x.key.workspace;
      if (out.has(ws)) continue;
      const limits = q.limits(ws);
      const use = q.usage(ws);
      out.set(ws, { slots: limits.jobTasks - use.jobTasks, memoryMb: limits.memoryMb - memoryInUse(use) });
    }
    return out;
  }

  /**
   * Counts a task as running: the execution's and the server's counts, and a slot of its workspace's quotas
   * (`force`: it runs already, re-adopted at start). False when the slot is not to be had (nothing is counted).
   */
  private occupy(x: LiveExecution, t: LiveTask, force = false): boolean {
    // This server's copy judges now; in a cluster the database judges too before the attempt starts (launch).
    const lease = this.deps.quota?.take(x.key.workspace, 'jobTasks', x.rec.memoryMb, { force });
    if (lease && isRefusal(lease)) return false;
    t.lease = lease;
    x.running++;
    this.runningTotal++;
    return true;
  }

  /** The task's process has ended (or never started): its slots are free. */
  private vacate(x: LiveExecution, t: LiveTask): void {
    if (t.node) this.count(x, t.node, -1);
    t.node = undefined;
    x.running--;
    this.runningTotal--;
    t.lease?.release();
    t.lease = undefined;
    if (t.sandbox) this.deps.instances.free(t.sandbox);
  }

  /**
   * Says on the job's object that the execution's ready tasks wait for the workspace's quotas, and which: as this
   * server's copy judges them, or as the database did (`refused`).
   */
  private noteHeld(x: LiveExecution, refused?: Refusal): void {
    const q = this.deps.quota;
    if (!q) return;
    const ws = x.key.workspace;
    const r =
      refused ??
      judge(ws, q.limits(ws), q.usage(ws), {
        quota: 'jobTasks',
        askMb: x.rec.memoryMb,
        noun: 'each of its tasks',
        fix: "They start as the workspace's running tasks end",
      });
    if (!r) return;
    x.held = true;
    const job = { kind: 'Job', workspace: ws, parent: '', name: x.rec.job };
    void this.deps.resources
      .recordEvent(job, `execution ${x.rec.id}: tasks wait for the workspace's quotas: ${r.message}`)
      .catch((err) => this.deps.logger?.warn({ err, execution: x.rec.id }, 'could not record a quota wait'));
  }

  private sandboxId(x: LiveExecution, t: LiveTask, attempt: number) {
    const h = createHash('sha256')
      .update(`${x.key.workspace}/${x.rec.job}/${x.rec.id}`)
      .digest('hex')
      .slice(0, 12);
    return `${TASK_ID_PREFIX}${h}-${t.index}-${attempt}`;
  }

  private async launch(x: LiveExecution, t: LiveTask, claimedAt: number) {
    // In a cluster the slot is the database's to give (decision 092): every live node's replicas, builds and tasks
    // and the workspace's sandboxes, under the workspace's lock. Another node may have taken the room since this
    // server last read what the others hold: the task waits then, as for a quota this server saw full.
    const refused = await t.lease?.admitted;
    if (refused) {
      this.vacate(x, t);
      t.status = 'pending';
      if (!x.held) this.noteHeld(x, refused);
      return;
    }
    const prev = t.attempts;
    const attempt = prev + 1;
    const sandbox = this.sandboxId(x, t, attempt);
    const at = new Date(this.now()).toISOString();
    // The `running` write and the sandbox's start go on together; the task's process starts only once the write
    // is stored (runAttempt awaits it), so no attempt runs unrecorded. A server killed in between leaves either an
    // unrecorded sandbox (removed at start: jobOwner does not want it) or a recorded one with no task process (lost,
    // run again).
    const recorded = this.store
      .write([
        {
          op: 'update',
          key: taskKey(x.key.workspace, x.rec.job, x.rec.id, t.index),
          mutate: (cur) => {
            if (cur.body.status !== 'pending' || cur.body.attempts !== prev) throw new Error('task moved on');
            return {
              ...cur.body,
              status: 'running',
              attempts: attempt,
              sandbox,
              node: t.node ?? this.deps.node,
              ended: undefined,
              startedAt: cur.body.startedAt ?? at,
              attemptStartedAt: at,
              updatedAt: at,
              notBefore: undefined,
            };
          },
        },
        ...(x.rec.status === 'pending' || x.rec.status === 'queued'
          ? [
              {
                op: 'update' as const,
                key: x.key,
                mutate: (cur: StoredObject) =>
                  cur.body.status === 'pending'
                    ? { ...cur.body, status: 'running', startedAt: at, updatedAt: at }
                    : cur.body,
              },
            ]
          : []),
      ])
      .then(
        () => {
          if (x.rec.status === 'pending') x.rec = { ...x.rec, status: 'running', startedAt: at };
          return true;
        },
        (err) => {
          this.deps.logger?.warn({ err, execution: x.rec.id, task: t.index }, 'could not start a task');
          return false;
        },
      );
    t.attempts = attempt;
    t.sandbox = sandbox;
    if (t.node) {
      // Placed on a node: it runs the attempt once it sees it recorded, and reports its end on the task.
      if (await recorded) return this.await(x, t, t.node);
      this.vacate(x, t);
    } else await this.follow(x, t, attempt, sandbox, 'run', claimedAt, recorded);
    if (!(await recorded)) {
      // Never started: back to waiting as it was (its sandbox, if made, goes; the slot was released).
      t.status = 'pending';
      t.attempts = prev;
      t.sandbox = undefined;
      this.schedule();
    }
  }

  /** Runs (or re-adopts) one attempt here to its end and records the outcome. */
  private async follow(
    x: LiveExecution,
    t: LiveTask,
    attempt: number,
    sandbox: string,
    how: 'run' | 'adopt',
    claimedAt = performance.now(),
    recorded: Promise<boolean> = Promise.resolve(true),
  ) {
    // Scheduling overhead: from the claim to the driver's call (the slot is released as soon as the attempt ends).
    let ownMs = 0;
    let result: AttemptResult | undefined;
    let infraError: string | undefined;
    try {
      if (how === 'run') {
        const built = this.deps.builder.builtByKey(x.key.workspace, x.rec.app);
        if (!built) throw new Error(`the built app ${x.rec.app} is gone`);
        const run = await attemptOf(this.deps, {
          workspace: x.key.workspace,
          rec: x.rec,
          index: t.index,
          attempt,
          input: t.input,
          sandboxId: sandbox,
          built,
          credential: (await this.credential(x)).key,
        });
        ownMs += performance.now() - claimedAt;
        // The slot moves to the instance, which holds it until the process ends (vacate) or the instance goes.
        const lease = t.lease;
        t.lease = undefined;
        result = await runAttempt(this.deps, { ...run, lease, ready: recorded });
      } else {
        result = await adoptAttempt(this.deps, sandbox, this.stopping.signal);
        if (!result) {
          if (this.stopping.signal.aborted) return;
          await this.deps.instances.remove(sandbox).catch(() => undefined);
          this.vacate(x, t);
          await this.lose(x, t);
          this.schedule();
          return;
        }
      }
    } catch (err) {
      infraError = (err as Error).message;
    }
    if (this.stopping.signal.aborted) return;
    if (!(await recorded)) {
      this.vacate(x, t);
      this.removeLater(sandbox);
      return;
    }
    // The process has ended: its slot is free now, before the log and outcome writes (the task itself stays
    // `running` in memory until its outcome is stored, so it is not picked again meanwhile).
    this.vacate(x, t);
    if (how === 'run') {
      x.overhead.ms += ownMs;
      x.overhead.attempts++;
    }
    this.schedule();
    await this.record(
      x,
      t,
      attempt,
      {
        exitCode: result?.exitCode ?? -1,
        timedOut: result?.timedOut ?? false,
        logs: result?.logs ?? `(no output: ${infraError})\n`,
        error: infraError,
      },
      // Removed only once the outcome is stored: a server killed in between finds the finished attempt's sandbox at
      // start, which no running task accounts for, and removes it (jobOwner), where removing first would make a
      // finished attempt look lost (run twice). Off the critical path: the slot is free once the outcome is stored,
      // so the next task's sandbox starts while this one's processes are killed and its cgroup and directories go.
      () => this.removeLater(sandbox),
    );
  }

  /** Keeps an ended attempt's log, stores its outcome (retry, success, failure) and ends the execution when done. */
  private async record(x: LiveExecution, t: LiveTask, attempt: number, o: Outcome, stored?: () => void) {
    this.keepLog(x, t.index, attempt, o.logs);
    const end = { exitCode: o.exitCode, timedOut: o.timedOut, cancelled: x.cancelling };
    const next = afterAttempt(end, attempt - t.lost, x.rec.maxRetries, this.now());
    const at = new Date(this.now()).toISOString();
    const condition = o.lostOn
      ? {
          type: 'Attempt',
          reason: 'lost',
          message: lostOnNode(
            o.lostOn,
            `attempt ${attempt}`,
            'its process is gone',
            next.status === 'pending'
              ? 'It runs again on a live node, as a retry'
              : 'No retry is left (maxRetries)',
          ),
        }
      : o.error
        ? { type: 'Attempt', reason: 'error', message: `attempt ${attempt}: ${o.error}` }
        : end.timedOut
          ? {
              type: 'Attempt',
              reason: 'timeout',
              message: `attempt ${attempt} killed after ${x.rec.timeoutS}s`,
            }
          : {
              type: 'Attempt',
              reason: end.exitCode === 0 ? 'succeeded' : 'failed',
              message: `attempt ${attempt} exited with code ${end.exitCode}`,
            };
    try {
      // In a cluster the log goes into the store with the outcome: a new leader reads it (job-task-logs.ts).
      const log = this.deps.nodes
        ? [await storeLogOp(this.store, this.logKey(x, t.index), this.logFileOf(x, t.index), attempt)]
        : [];
      await this.store.write([
        ...log,
        {
          op: 'update',
          key: taskKey(x.key.workspace, x.rec.job, x.rec.id, t.index),
          mutate: (cur) => {
            if (cur.body.status !== 'running' || cur.body.attempts !== attempt)
              throw new Error('attempt already recorded');
            return {
              ...cur.body,
              status: next.status,
              exitCode: end.exitCode,
              sandbox: undefined,
              ended: undefined,
              notBefore: next.notBeforeMs ? new Date(next.notBeforeMs).toISOString() : undefined,
              completedAt: isTaskDone(next.status) ? at : undefined,
              updatedAt: at,
              conditions: [...(cur.body.conditions ?? []), condition].slice(-10),
            };
          },
        },
      ]);
    } catch (err) {
      this.deps.logger?.warn({ err, execution: x.rec.id, task: t.index }, 'task outcome not recorded');
    }
    stored?.();
    t.status = next.status;
    t.notBeforeMs = next.notBeforeMs;
    t.sandbox = undefined;
    await this.settle(x);
    this.schedule();
  }

  /** Places a picked task's attempt on a node; false when no node can take it now (it stays waiting). */
  private placeOn(x: LiveExecution, t: LiveTask, nodes: TaskNodes): boolean {
    let node: string | undefined;
    let waitFor = `a node${x.region ? ` of region ${x.region}` : ''} with room for them`;
    if (x.volumes?.length && this.deps.node) {
      const on = nodes.volumeNodes(x.key.workspace, x.volumes);
      const [at] = on;
      if (on.length > 1) waitFor = `one node: its volumes are on different nodes (${on.join(', ')})`;
      else if (at !== undefined && !nodes.usable(at))
        waitFor = `node ${at}, which holds its volumes' data and is not answering or drained`;
      else node = at ?? this.deps.node;
    } else
      node = nodes.place(
        x.region,
        (n) => this.onNode.get(n) ?? { sandboxes: 0, memoryMb: 0 },
        (n) => (this.onNode.get(n)?.sandboxes ?? 0) < this.maxTasks,
      );
    if (!node) {
      if (!x.noNode) {
        x.noNode = true;
        const job = { kind: 'Job', workspace: x.key.workspace, parent: '', name: x.rec.job };
        void this.deps.resources
          .recordEvent(job, `execution ${x.rec.id}: its tasks wait for ${waitFor}`)
          .catch((err) =>
            this.deps.logger?.warn({ err, execution: x.rec.id }, 'could not record a node wait'),
          );
      }
      return false;
    }
    x.noNode = false;
    this.count(x, node, 1);
    t.node = node;
    return true;
  }

  private count(x: LiveExecution, node: string, n: 1 | -1) {
    const l = this.onNode.get(node) ?? { sandboxes: 0, memoryMb: 0 };
    this.onNode.set(node, { sandboxes: l.sandboxes + n, memoryMb: l.memoryMb + n * x.rec.memoryMb });
  }

  /** Awaits the end of an attempt placed on `node`: its report on the task, or the node's death. */
  private await(x: LiveExecution, t: LiveTask, node: string) {
    if (!t.sandbox) return;
    const id = `${x.key.workspace}/${x.rec.job}/${x.rec.id}#${t.index}`;
    this.remote.set(id, { x, t, attempt: t.attempts, node, sandbox: t.sandbox });
    // A report the node stored before this registration (a fast attempt, this loop busy) is not missed.
    void this.store
      .get(taskKey(x.key.workspace, x.rec.job, x.rec.id, t.index))
      .then((o) => o && this.reported(o))
      .catch(() => undefined);
  }

  /** A task changed in the store: a node's report of an attempt awaited here ends it. */
  private reported(o: StoredObject) {
    const body = o.body as TaskRecord;
    const ended: AttemptReport | undefined = body.ended;
    if (!ended) return;
    const id = `${o.workspace}/${o.parent}#${body.index}`;
    const r = this.remote.get(id);
    if (!r || r.attempt !== ended.attempt || body.attempts !== r.attempt) return;
    this.remote.delete(id);
    void this.ended(r, {
      exitCode: ended.exitCode,
      timedOut: ended.timedOut,
      logs: ended.logs,
      error: ended.error && `on node ${r.node}: ${ended.error}`,
    });
  }

  /**
   * The attempts awaited from nodes whose lease lapsed: each fails (counted against maxRetries, as the issue's "job
   * tasks on it fail and are retried per their policy" asks), named on its condition and in one event per execution.
   */
  private lostNodes() {
    const nodes = this.deps.nodes;
    if (!nodes || !this.remote.size) return;
    const lost = new Map<LiveExecution, Map<string, RemoteAttempt[]>>();
    for (const [id, r] of this.remote) {
      if (!nodes.lapsed(r.node)) continue;
      this.remote.delete(id);
      const byNode = lost.get(r.x) ?? new Map<string, RemoteAttempt[]>();
      byNode.set(r.node, [...(byNode.get(r.node) ?? []), r]);
      lost.set(r.x, byNode);
    }
    for (const [x, byNode] of lost)
      for (const [node, rs] of byNode) {
        const tasks = rs.map((r) => r.t.index);
        const job = { kind: 'Job', workspace: x.key.workspace, parent: '', name: x.rec.job };
        void this.deps.resources
          .recordEvent(
            job,
            lostOnNode(
              node,
              `task${tasks.length > 1 ? 's' : ''} ${tasks.join(', ')} of execution ${x.rec.id}`,
              'their processes are gone',
              'Each attempt counts as failed and runs again on a live node while its maxRetries allow',
            ),
          )
          .catch((err) =>
            this.deps.logger?.warn({ err, execution: x.rec.id }, 'could not record a lost node'),
          );
        for (const r of rs)
          void this.ended(r, {
            exitCode: -1,
            timedOut: false,
            logs: `(no output: node ${node} stopped while it ran this attempt)\n`,
            lostOn: node,
          });
      }
  }

  /** An attempt that ran on a node has ended (reported, or its node died). */
  private async ended(r: RemoteAttempt, o: Outcome) {
    const { x, t } = r;
    if (this.stopping.signal.aborted) return;
    this.vacate(x, t);
    x.overhead.attempts++;
    this.schedule();
    await this.record(x, t, r.attempt, o).catch((err) =>
      this.deps.logger?.warn({ err, execution: x.rec.id, task: t.index }, 'task outcome not recorded'),
    );
  }

  /**
   * The execution's task credential, issued on first need and again when the one held would expire before an
   * attempt starting now could end; every one issued is recorded on the execution, to be revoked at its end.
   */
  private async credential(x: LiveExecution): Promise<TaskCredential> {
    const needMs = x.rec.timeoutS * 1000 + CREDENTIAL_MARGIN_MS;
    for (;;) {
      const pending = x.cred;
      const held = pending && (await pending.catch(() => undefined));
      // Another attempt began issuing while this one waited: take that one.
      if (x.cred !== pending) continue;
      if (held && held.expiresAt >= this.now() + needMs) return held;
      x.cred = this.issue(x, needMs);
      return x.cred;
    }
  }

  private async issue(x: LiveExecution, needMs: number): Promise<TaskCredential> {
    const { cred, op } = issueCredential(x.key.workspace, x.rec.job, x.rec.id, this.now(), needMs);
    await this.store.write([
      op,
      {
        op: 'update',
        key: x.key,
        mutate: (cur) => ({
          ...cur.body,
          credentialHashes: [...(cur.body.credentialHashes ?? []), cred.hash],
        }),
      },
    ]);
    return cred;
  }

  /** Removes a finished attempt's sandbox in the background; `stop` waits for these. */
  private removeLater(sandbox: string) {
    const p = this.deps.instances
      .remove(sandbox)
      .catch((err) => this.deps.logger?.warn({ err, sandbox }, 'could not remove a task sandbox'))
      .finally(() => this.removing.delete(p));
    this.removing.add(p);
  }

  /**
   * An attempt whose sandbox did not survive this server's restart (SQLite; in a cluster an attempt is its node's,
   * and a dead node's fail: lostNodes): back to waiting, not counted against the retries.
   */
  private async lose(x: LiveExecution, t: LiveTask): Promise<void> {
    const attempt = t.attempts;
    t.status = 'pending';
    t.node = undefined;
    t.lost++;
    t.sandbox = undefined;
    const at = new Date(this.now()).toISOString();
    await this.store.write([
      {
        op: 'update',
        key: taskKey(x.key.workspace, x.rec.job, x.rec.id, t.index),
        mutate: (cur) => ({
          ...cur.body,
          status: 'pending',
          sandbox: undefined,
          node: undefined,
          lost: (cur.body.lost ?? 0) + 1,
          updatedAt: at,
          conditions: [
            ...(cur.body.conditions ?? []),
            {
              type: 'Attempt',
              reason: 'lost',
              message: `attempt ${attempt} was lost with the server; running it again`,
            },
          ].slice(-10),
        }),
      },
    ]);
  }

  /** Ends the execution once no task waits or runs. */
  private async settle(x: LiveExecution) {
    const status: ExecutionStatus = executionStatus(countTasks(x.tasks.map((t) => t.status)), x.cancelling);
    if (!isExecutionEnded(status)) return;
    const id = `${x.key.workspace}/${x.rec.job}/${x.rec.id}`;
    if (!this.live.has(id)) return;
    this.live.delete(id);
    const at = new Date(this.now()).toISOString();
    // The tasks' credentials are revoked in the write that ends the execution: none outlives it.
    const hashes =
      ((await this.store.get(x.key))?.body as ExecutionRecord | undefined)?.credentialHashes ?? [];
    const [o] = await this.store.write([
      {
        op: 'update',
        key: x.key,
        mutate: (cur) => ({ ...cur.body, status, completedAt: at, updatedAt: at }),
      },
      ...(await revokeOps(this.store, hashes)),
    ]);
    this.deps.logger?.info(
      {
        workspace: x.key.workspace,
        job: x.rec.job,
        execution: x.rec.id,
        status,
        schedulingOverheadMsPerAttempt: x.overhead.attempts
          ? Number((x.overhead.ms / x.overhead.attempts).toFixed(2))
          : undefined,
      },
      'job execution ended',
    );
    const c = countTasks(x.tasks.map((t) => t.status));
    this.deps.onFinished?.(
      x.key.workspace,
      { ...(o.body as ExecutionRecord) },
      {
        total: x.tasks.length,
        success: c.succeeded,
        failure: c.failed + c.timeout,
        cancelled: c.cancelled,
      },
    );
  }

  /** Each attempt's output is appended to the task's log file, kept with the execution. */
  private logFileOf(x: LiveExecution, index: number): string {
    return this.logFile(x.key.workspace, x.rec.job, x.rec.id, index);
  }

  private logKey(x: LiveExecution, index: number): ResourceKey {
    return taskLogKey(x.key.workspace, x.rec.job, x.rec.id, index);
  }

  /**
   * The task's log file, brought up to date from the store first in a cluster (a failover: its attempts ended under
   * another leader); what the logs route reads and follows.
   */
  async taskLogFile(workspace: string, job: string, id: string, index: number): Promise<string> {
    const file = this.logFile(workspace, job, id, index);
    if (this.deps.nodes) await restoreLog(this.store, taskLogKey(workspace, job, id, index), file);
    return file;
  }

  private keepLog(x: LiveExecution, index: number, attempt: number, text: string) {
    const file = this.logFileOf(x, index);
    mkdirSync(dirname(file), { recursive: true });
    const header = `--- attempt ${attempt} ---\n`;
    const entry = `${header}${text}${text.endsWith('\n') || !text ? '' : '\n'}`;
    // An attempt whose end a killed server did not store is kept again by the next one (it re-adopts the
    // finished sandbox): its section is replaced, so the log shows each attempt once.
    const prior = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const at = prior.startsWith(header) ? 0 : prior.lastIndexOf(`\n${header}`) + 1;
    if (at > 0 || prior.startsWith(header)) writeFileSync(file, prior.slice(0, at) + entry);
    else appendFileSync(file, entry);
  }

  logFile(workspace: string, job: string, id: string, index: number): string {
    return `${this.deps.logsDir}/${workspace}/${job}/${id}/${index}.log`;
  }
}
