// Ended job executions are kept BERTH_JOB_EXECUTION_RETENTION_DAYS after they ended (decision 098), then deleted with
// their tasks, the task logs a cluster keeps in the store (job-task-logs.ts) and the log files: what a job that runs
// every minute would otherwise add for ever (a store object per execution and per task, a log file per task). Run by
// the controllers' leader once when it takes the lead and then every RETENTION_EVERY_MS; each server also removes the
// log files of executions the store no longer has (one that led before kept its own).
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { EVERY_WORKSPACE, type Store, type WriteOp } from '../../store/store.js';
import { isExecutionEnded } from './job-decide.js';
import { EXECUTION_KIND, type ExecutionRecord, TASK_KIND, tasksParent } from './job-store.js';
import { TASK_LOG_KIND } from './job-task-logs.js';

export const RETENTION_EVERY_MS = 60 * 60_000;
const DAY_MS = 24 * 3600_000;

export interface RetentionDeps {
  /** The leader's (fenced) store: a server that lost the lead deletes nothing. */
  store: Store;
  /** Where the job runner keeps task logs: `<logsDir>/<workspace>/<job>/<execution>/`. */
  logsDir: string;
  retentionDays: number;
  now?: () => number;
  logger?: Logger;
}

/** Deletes the executions ended more than the retention ago; returns how many. */
export async function removeOldExecutions(d: RetentionDeps): Promise<number> {
  if (d.retentionDays <= 0) return 0;
  const before = new Date((d.now ?? Date.now)() - d.retentionDays * DAY_MS).toISOString();
  let removed = 0;
  for (const o of await d.store.list({ workspace: EVERY_WORKSPACE, kind: EXECUTION_KIND })) {
    const rec = o.body as ExecutionRecord;
    const ended = rec.completedAt ?? rec.updatedAt;
    if (!isExecutionEnded(rec.status) || !ended || ended >= before) continue;
    const parent = tasksParent(rec.job, rec.id);
    const ops: WriteOp[] = [];
    for (const kind of [TASK_KIND, TASK_LOG_KIND])
      for (const t of await d.store.list({ kind, workspace: o.workspace, parent }))
        ops.push({ op: 'delete', key: t, expectVersion: t.resourceVersion });
    ops.push({ op: 'delete', key: o, expectVersion: o.resourceVersion });
    await d.store.write(ops);
    rmSync(join(d.logsDir, o.workspace, rec.job, rec.id), { recursive: true, force: true });
    removed++;
  }
  if (removed)
    d.logger?.info({ executions: removed, retentionDays: d.retentionDays }, 'removed old job executions');
  return removed;
}

/** Removes this server's log directories of executions the store does not have (deleted by another leader). */
export async function removeOrphanLogs(store: Store, logsDir: string): Promise<number> {
  if (!existsSync(logsDir)) return 0;
  // One read of every execution, not one per directory: a busy job keeps tens of thousands (a month of them).
  const known = new Set(
    (await store.list({ workspace: EVERY_WORKSPACE, kind: EXECUTION_KIND })).map(
      (o) => `${o.workspace}/${o.parent}/${o.name}`,
    ),
  );
  let removed = 0;
  for (const ws of readdirSync(logsDir))
    for (const job of readdirSync(join(logsDir, ws)))
      for (const id of readdirSync(join(logsDir, ws, job))) {
        if (known.has(`${ws}/${job}/${id}`)) continue;
        rmSync(join(logsDir, ws, job, id), { recursive: true, force: true });
        removed++;
      }
  return removed;
}

/** Runs the retention now and then every RETENTION_EVERY_MS until stopped. */
export function startRetention(d: RetentionDeps): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  const pass = () => {
    running = running
      .then(() => removeOldExecutions(d))
      .catch((err) => d.logger?.warn({ err }, 'could not remove old job executions'));
  };
  pass();
  const timer = setInterval(pass, RETENTION_EVERY_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
