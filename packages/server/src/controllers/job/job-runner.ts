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
import { attachVolumes, holderName } from '../volume/volume-attach.js';
import { isRefusal, type Lease, type QuotaLedger } from '../core/quota-ledger.js';
import { judge, memoryInUse } from '../core/quotas.js';
import { imageFields } from '../code/app.js';
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
  executionDataUrl,
  runAttempt,
  stopAttempt,
  TASK_ID_PREFIX,
  type TaskDeps,
} from './job-task.js';
import {
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
      // Tasks whose attempt ran on another node (a leader that died or was drained), by that node.
      const lostOn = new Map<string, number[]>();
      for (const t of x.tasks) {
        if (t.status !== 'running' || !t.sandbox) continue;
        const info = await this.deps.instances.driver.inspect(t.sandbox);
        if (info && info.state !== 'dead') {
          this.occupy(x, t, true);
          if (t.lease) this.deps.instances.hold(t.sandbox, t.lease);
          t.lease = undefined;
          void this.follow(x, t, t.attempts, t.sandbox, 'adopt');
        } else {
          const node = await this.lose(x, t);
          if (node) lostOn.set(node, [...(lostOn.get(node) ?? []), t.index]);
        }
      }
      for (const [node, tasks] of lostOn) {
        const job = { kind: 'Job', workspace: x.key.workspace, parent: '', name: x.rec.job };
        await this.deps.resources.recordEvent(
          job,
          lostOnNode(
            node,
            `task${tasks.length > 1 ? 's' : ''} ${tasks.join(', ')} of execution ${x.rec.id}`,
            'their processes are gone',
            `Node ${this.deps.node} runs them again (not counted against maxRetries)`,
          ),
        );
      }
      if (x.cancelling) void this.cancel(x.key.workspace, rec.job, rec.id);
      // A server killed between an execution's last outcome and its end leaves it with nothing left to run.
      else await this.settle(x);
    }
    this.started = true;
    this.timer = setInterval(() => this.schedule(), TICK_MS);
    this.timer.unref();
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
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
        input: t.input,
        notBeforeMs: t.notBefore ? Date.parse(t.notBefore) : undefined,
      }));
    const x: LiveExecution = {
      key: execKey(o.workspace, rec.job, rec.id),
      rec,
      tasks,
      running: 0,
      cancelling: rec.status === 'cancelling',
      overhead: { ms: 0, attempts: 0 },
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
    return t && { status: t.status, attempts: t.attempts, sandbox: t.sandbox };
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
      if (t.status !== 'running' || !t.sandbox) continue;
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
    const execs = [...this.live.values()].filter((x) => !x.cancelling && this.hasApp(x));
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
      this.maxTasks - this.runningTotal,
      this.now(),
      this.rooms(execs),
      held,
    );
    for (const p of picks) {
      const x = this.live.get(p.execution);
      const t = x?.tasks[p.index];
      if (!x || !t) continue;
      if (!this.occupy(x, t)) continue;
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
    if (x.appHere) return true;
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
    // Tasks run on the leader alone: its ledger judges them, and the database only counts them (decision 092).
    const lease = this.deps.quota?.take(x.key.workspace, 'jobTasks', x.rec.memoryMb, {
      force,
      startsNow: true,
    });
    if (lease && isRefusal(lease)) return false;
    t.lease = lease;
    x.running++;
    this.runningTotal++;
    return true;
  }

  /** The task's process has ended (or never started): its slots are free. */
  private vacate(x: LiveExecution, t: LiveTask): void {
    x.running--;
    this.runningTotal--;
    t.lease?.release();
    t.lease = undefined;
    if (t.sandbox) this.deps.instances.free(t.sandbox);
  }

  /** Says on the job's object that the execution's ready tasks wait for the workspace's quotas, and which. */
  private noteHeld(x: LiveExecution): void {
    const q = this.deps.quota;
    if (!q) return;
    const ws = x.key.workspace;
    const r = judge(ws, q.limits(ws), q.usage(ws), {
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
              node: this.deps.node,
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
    await this.follow(x, t, attempt, sandbox, 'run', claimedAt, recorded);
    if (!(await recorded)) {
      // Never started: back to waiting as it was (its sandbox, if made, goes; the slot was released).
      t.status = 'pending';
      t.attempts = prev;
      t.sandbox = undefined;
      this.schedule();
    }
  }

  /** Runs (or re-adopts) one attempt to its end and records the outcome. */
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
        const job = await this.deps.resources.store.get({
          kind: 'Job',
          workspace: x.key.workspace,
          parent: '',
          name: x.rec.job,
        });
        const open = job
          ? this.deps.resources.openSecrets(this.deps.resources.kind('Job'), job.body.spec ?? {})
          : {};
        const built = this.deps.builder.builtByKey(x.key.workspace, x.rec.app);
        if (!built) throw new Error(`the built app ${x.rec.app} is gone`);
        const envs: Record<string, string> = {
          BL_API_KEY: (await this.credential(x)).key,
          ...(built.plan.manifest?.env ?? {}),
        };
        for (const e of open.runtime?.envs ?? []) envs[e.name] = e.value ?? '';
        Object.assign(envs, x.rec.envOverride ?? {}, {
          BL_WORKSPACE: x.key.workspace,
          BL_NAME: x.rec.job,
          BL_EXECUTION_ID: x.rec.id,
          TASK_INDEX: String(t.index),
          BL_TASK_ATTEMPT: String(attempt),
          BL_EXECUTION_DATA_URL: executionDataUrl(t.index, t.input),
        });
        // Persistent volumes are held by the job (one holder: `job:<name>`) and bound into every task.
        const volumes = await attachVolumes(
          this.deps.resources,
          this.deps.instances.driver,
          x.key.workspace,
          holderName('job', x.rec.job),
          (open.volumes ?? []).filter(isPersistentJobVolume),
        );
        ownMs += performance.now() - claimedAt;
        // The slot moves to the instance, which holds it until the process ends (vacate) or the instance goes.
        const lease = t.lease;
        t.lease = undefined;
        result = await runAttempt(this.deps, {
          volumes,
          sandboxId: sandbox,
          workspace: x.key.workspace,
          job: x.rec.job,
          lease,
          appDir: built.dir,
          ...imageFields(built.base),
          start: built.plan.start,
          memoryMb: x.rec.memoryMb,
          envs,
          timeoutS: x.rec.timeoutS,
          ready: recorded,
        });
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
    this.keepLog(x, t.index, attempt, result?.logs ?? `(no output: ${infraError})\n`);
    const end = {
      exitCode: result?.exitCode ?? -1,
      timedOut: result?.timedOut ?? false,
      cancelled: x.cancelling,
    };
    const next = afterAttempt(end, attempt - t.lost, x.rec.maxRetries, this.now());
    const at = new Date(this.now()).toISOString();
    const condition = infraError
      ? { type: 'Attempt', reason: 'error', message: `attempt ${attempt}: ${infraError}` }
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
      await this.store.write([
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
    // Removed only once the outcome is stored: a server killed in between finds the finished attempt's sandbox at
    // start, which no running task accounts for, and removes it (jobOwner), where removing first would make a finished
    // attempt look lost (run twice).
    // Off the critical path: the slot is free once the outcome is stored, so the next task's sandbox starts while
    // this one's processes are killed and its cgroup and directories go (most of a slot's time otherwise).
    this.removeLater(sandbox);
    t.status = next.status;
    t.notBeforeMs = next.notBeforeMs;
    t.sandbox = undefined;
    await this.settle(x);
    this.schedule();
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
   * An attempt whose sandbox did not survive: back to waiting, not counted against the retries. Returns the node it
   * ran on when that was another node (a cluster's leader that died or was drained).
   */
  private async lose(x: LiveExecution, t: LiveTask): Promise<string | undefined> {
    const attempt = t.attempts;
    t.status = 'pending';
    t.lost++;
    t.sandbox = undefined;
    const at = new Date(this.now()).toISOString();
    let elsewhere: string | undefined;
    await this.store.write([
      {
        op: 'update',
        key: taskKey(x.key.workspace, x.rec.job, x.rec.id, t.index),
        mutate: (cur) => {
          const ranOn: string | undefined = cur.body.node;
          elsewhere = ranOn && ranOn !== this.deps.node ? ranOn : undefined;
          return {
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
                message: elsewhere
                  ? lostOnNode(
                      elsewhere,
                      `attempt ${attempt}`,
                      'its process is gone',
                      `Node ${this.deps.node} runs it again`,
                    )
                  : `attempt ${attempt} was lost with the server; running it again`,
              },
            ].slice(-10),
          };
        },
      },
    ]);
    return elsewhere;
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
  private keepLog(x: LiveExecution, index: number, attempt: number, text: string) {
    const file = this.logFile(x.key.workspace, x.rec.job, x.rec.id, index);
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
