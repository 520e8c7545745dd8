// What each node of a cluster runs for the job tasks placed on it (docs/decisions/093-job-tasks-across-nodes.md): the
// controllers' leader (job-runner.ts) places each attempt on a node and records it on the task (`node`, `sandbox`,
// `running`); the node that sees an attempt placed on it starts it (or re-adopts it, started by this node's previous
// process), building the job's app first when it lacks it, and reports its end on the task (`ended`), fenced on its
// lease and on the task's placement (decision 064): a node that lost its lease, or whose attempt was given up as
// lost, writes nothing. The leader records the outcome (retry, success, failure) from that report.
import type { Logger } from 'pino';
import type { Builder } from '../../builds/builder.js';
import type { Resources } from '../../store/resources.js';
import { EVERY_WORKSPACE, FencedError, type StoredObject } from '../../store/store.js';
import { issueCredential, type TaskCredential } from './job-credential.js';
import { isExecutionEnded } from './job-decide.js';
import { CANCEL_KILL_MS, CREDENTIAL_MARGIN_MS } from './job-runner.js';
import {
  type AttemptReport,
  EXECUTION_KIND,
  type ExecutionRecord,
  execKey,
  TASK_KIND,
  type TaskRecord,
  taskKey,
  tasksParent,
} from './job-store.js';
import { adoptAttempt, attemptOf, runAttempt, stopAttempt, type TaskDeps } from './job-task.js';

/**
 * How often the unfinished executions are looked at again when something may have been missed: a task placed here
 * while this node held no lease, or a report that could not be written (the database down).
 */
const PASS_MS = 3_000;

export interface JobHoldingDeps extends TaskDeps {
  self: string;
  /** Writes fenced on this node's lease and on each task's `node` (main/store.ts `held`). */
  resources: Resources;
  builder: Pick<Builder, 'builtByKey'>;
  /** Builds an execution's app on this node (job-rebuild.ts); a rejection says why the attempt cannot run. */
  rebuild: (workspace: string, job: string, app: string, signal: AbortSignal) => Promise<void>;
  /** Whether this node holds its lease (decision 064): without it, it starts nothing. */
  holding: () => boolean;
  logger?: Logger;
  now?: () => number;
}

/** An attempt is placed on `self` and not reported yet. */
export const placedHere = (t: TaskRecord, self: string): boolean =>
  t.status === 'running' && t.node === self && !!t.sandbox && t.ended?.attempt !== t.attempts;

export class JobHolding {
  /** The sandboxes of the attempts this node runs now, by execution (`<workspace>/<job>/<id>`). */
  private readonly running = new Map<string, Set<string>>();
  private readonly creds = new Map<string, Promise<TaskCredential>>();
  private readonly abort = new AbortController();
  private timer?: NodeJS.Timeout;
  private unwatch?: () => void;
  private readonly now: () => number;
  /** Something placed here may not have been acted on: the next pass looks at every unfinished execution. */
  private missed = true;

  constructor(private readonly deps: JobHoldingDeps) {
    this.now = deps.now ?? Date.now;
  }

  private get store() {
    return this.deps.resources.store;
  }

  start(): void {
    this.unwatch = this.store.watch((c) => {
      if (c.type === 'DELETED') return;
      if (c.object.kind === TASK_KIND) this.look(c.object);
      else if (c.object.kind === EXECUTION_KIND) this.execution(c.object);
    });
    this.timer = setInterval(() => {
      if (this.missed) void this.pass();
    }, PASS_MS);
    this.timer.unref();
    void this.pass();
  }

  async stop(): Promise<void> {
    this.abort.abort(new Error('the server is stopping'));
    this.unwatch?.();
    if (this.timer) clearInterval(this.timer);
    // Attempts under way are not waited for: their sandboxes keep running, re-adopted by this node's next process.
  }

  private async pass(): Promise<void> {
    if (this.abort.signal.aborted || !this.deps.holding()) return;
    this.missed = false;
    try {
      for (const o of await this.store.list({ workspace: EVERY_WORKSPACE, kind: EXECUTION_KIND })) {
        const rec = o.body as ExecutionRecord;
        if (isExecutionEnded(rec.status)) continue;
        this.execution(o);
        const parent = tasksParent(rec.job, rec.id);
        for (const t of await this.store.list({ kind: TASK_KIND, workspace: o.workspace, parent }))
          this.look(t);
      }
    } catch (err) {
      this.missed = true;
      this.deps.logger?.warn({ err }, 'could not look at the job tasks placed on this node');
    }
  }

  /** An execution being cancelled: the attempts it runs here get SIGTERM, and their sandboxes go after the grace. */
  private execution(o: StoredObject) {
    const rec = o.body as ExecutionRecord;
    const id = `${o.workspace}/${rec.job}/${rec.id}`;
    if (isExecutionEnded(rec.status)) this.creds.delete(id);
    if (rec.status !== 'cancelling') return;
    for (const sandbox of this.running.get(id) ?? []) {
      void stopAttempt(this.deps, sandbox).catch(() => undefined);
      setTimeout(
        () => void this.deps.instances.remove(sandbox).catch(() => undefined),
        CANCEL_KILL_MS,
      ).unref();
    }
  }

  private look(o: StoredObject) {
    const t = o.body as TaskRecord;
    if (this.abort.signal.aborted || !placedHere(t, this.deps.self)) return;
    if (!this.deps.holding()) {
      this.missed = true;
      return;
    }
    const [job, id] = o.parent.split('/');
    const exec = `${o.workspace}/${job}/${id}`;
    const sandbox = t.sandbox as string;
    const mine = this.running.get(exec) ?? new Set<string>();
    if (mine.has(sandbox)) return;
    mine.add(sandbox);
    this.running.set(exec, mine);
    void this.run(o.workspace, job, id, t, sandbox)
      .catch((err) =>
        this.deps.logger?.warn(
          { err, execution: id, task: t.index },
          'a job task placed on this node failed',
        ),
      )
      .finally(() => {
        mine.delete(sandbox);
        if (!mine.size) this.running.delete(exec);
      });
  }

  /** Runs (or re-adopts) the attempt, then reports its end on the task and removes its sandbox. */
  private async run(workspace: string, job: string, id: string, t: TaskRecord, sandbox: string) {
    const attempt = t.attempts;
    let report: Omit<AttemptReport, 'attempt'>;
    try {
      const info = await this.deps.instances.driver.inspect(sandbox);
      const adopted =
        info && info.state !== 'dead' ? await adoptAttempt(this.deps, sandbox, this.abort.signal) : undefined;
      if (this.abort.signal.aborted) return;
      // What a previous process of this node left of it, its task process gone: the attempt starts afresh.
      if (!adopted && info) await this.deps.instances.remove(sandbox);
      report = adopted ?? (await this.begin(workspace, job, id, t, sandbox));
    } catch (err) {
      report = { exitCode: -1, timedOut: false, logs: '', error: (err as Error).message };
    }
    // Stopping: reported by this node's next process, which finds the attempt's sandbox (ended or not).
    if (this.abort.signal.aborted) return;
    try {
      await this.store.write([
        {
          op: 'update',
          key: taskKey(workspace, job, id, t.index),
          mutate: (cur) => {
            const now = cur.body as TaskRecord;
            if (now.status !== 'running' || now.attempts !== attempt || now.node !== this.deps.self)
              throw new Error('the attempt was given up (its node was taken for dead) or cancelled');
            return { ...cur.body, ended: { attempt, ...report } };
          },
        },
      ]);
    } catch (err) {
      this.deps.logger?.warn({ err, execution: id, task: t.index }, 'the end of a job task was not reported');
      // Not refused but failed (the database unreachable): the sandbox is kept, its ended process re-adopted and
      // reported by a later pass.
      if (!(err instanceof FencedError) && (await this.stillHere(workspace, job, id, t.index))) {
        this.missed = true;
        return;
      }
    }
    await this.deps.instances
      .remove(sandbox)
      .catch((err) => this.deps.logger?.warn({ err, sandbox }, 'could not remove a task sandbox'));
  }

  /** Whether the task still runs an attempt placed here, unreported (unknown, the database unreachable: yes). */
  private async stillHere(workspace: string, job: string, id: string, index: number): Promise<boolean> {
    try {
      const o = await this.store.get(taskKey(workspace, job, id, index));
      return !!o && placedHere(o.body as TaskRecord, this.deps.self);
    } catch {
      return true;
    }
  }

  private async begin(
    workspace: string,
    job: string,
    id: string,
    t: TaskRecord,
    sandbox: string,
  ): Promise<Omit<AttemptReport, 'attempt'>> {
    const o = await this.store.get(execKey(workspace, job, id));
    const rec = o?.body as ExecutionRecord | undefined;
    if (!rec || isExecutionEnded(rec.status) || rec.status === 'cancelling')
      return {
        exitCode: -1,
        timedOut: false,
        logs: '',
        error: 'the execution ended before the attempt started',
      };
    let built = this.deps.builder.builtByKey(workspace, rec.app);
    if (!built) {
      try {
        await this.deps.rebuild(workspace, job, rec.app, this.abort.signal);
      } catch (err) {
        throw new Error(
          `app ${rec.app} could not be built on node ${this.deps.self}: ${(err as Error).message}`,
        );
      }
      built = this.deps.builder.builtByKey(workspace, rec.app);
      if (!built) throw new Error(`the built app ${rec.app} is gone`);
    }
    const run = await attemptOf(this.deps, {
      workspace,
      rec,
      index: t.index,
      attempt: t.attempts,
      input: t.input,
      sandboxId: sandbox,
      built,
      credential: (await this.credential(workspace, rec)).key,
    });
    const result = await runAttempt(this.deps, run);
    if (!result) throw new Error('the attempt did not start');
    return result;
  }

  /** The execution's task credential on this node: issued here (recorded on the execution, revoked at its end). */
  private async credential(workspace: string, rec: ExecutionRecord): Promise<TaskCredential> {
    const id = `${workspace}/${rec.job}/${rec.id}`;
    const needMs = rec.timeoutS * 1000 + CREDENTIAL_MARGIN_MS;
    const held = await this.creds.get(id)?.catch(() => undefined);
    if (held && held.expiresAt >= this.now() + needMs) return held;
    const issuing = (async () => {
      const { cred, op } = issueCredential(workspace, rec.job, rec.id, this.now(), needMs);
      await this.store.write([
        op,
        {
          op: 'update',
          key: execKey(workspace, rec.job, rec.id),
          mutate: (cur) => ({
            ...cur.body,
            credentialHashes: [...(cur.body.credentialHashes ?? []), cred.hash],
          }),
        },
      ]);
      return cred;
    })();
    this.creds.set(id, issuing);
    return issuing;
  }
}
