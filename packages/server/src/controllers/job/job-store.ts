// How executions and their tasks are kept in the store: an execution is a `JobExecution` object under its job
// (parent = the job's name), each task a `JobTask` object under the execution (parent = `<job>/<execution>`, name
// = the zero-padded index, so a listing is in index order). One small object per task keeps each transition a
// small write, which is what lets the group commit absorb thousands of tasks; a creation writes all in one.
import { createHash, randomBytes } from 'node:crypto';
import type { ResourceKey } from '../../store/store.js';
import type { ExecutionStatus, TaskStatus } from './job-decide.js';

export const EXECUTION_KIND = 'JobExecution';
export const TASK_KIND = 'JobTask';

export interface ExecutionRecord {
  id: string;
  job: string;
  status: ExecutionStatus;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  updatedAt: string;
  /** The revision active when the execution was created, and its built app (content address). */
  revision: string;
  app: string;
  memoryMb: number;
  maxConcurrentTasks: number;
  maxRetries: number;
  timeoutS: number;
  total: number;
  /** Per-execution environment (the `env` of the request); names only ever leave the server. */
  envOverride?: Record<string, string>;
  memoryOverride?: number;
  /** sha256 of the task credentials issued for it (controllers/job/job-credential.ts), revoked when it ends. */
  credentialHashes?: string[];
  /** A digest of the request, so the same executionId sent again with the same body is the same execution. */
  requestDigest: string;
}

export interface TaskRecord {
  index: number;
  input: unknown;
  status: TaskStatus;
  attempts: number;
  /** Attempts lost with a server (re-run; not counted against maxRetries). */
  lost?: number;
  exitCode?: number;
  sandbox?: string;
  /** The cluster node its last attempt ran on (none on SQLite): a lost attempt's condition names it. */
  node?: string;
  /** A node's report of the attempt it ran (decision 093), until the controllers' leader records its outcome. */
  ended?: AttemptReport;
  startedAt?: string;
  attemptStartedAt?: string;
  completedAt?: string;
  updatedAt?: string;
  notBefore?: string;
  conditions?: { type: string; reason: string; message: string }[];
}

/** How an attempt run on a node of a cluster ended, as that node reports it on the task. */
export interface AttemptReport {
  attempt: number;
  exitCode: number;
  timedOut: boolean;
  /** Its output (the daemon keeps at most the last 2 MB of a process's). */
  logs: string;
  /** Why it could not run (its app not built there, its sandbox not started). */
  error?: string;
}

/** Index digits in a task's name: enough for MAX_TASKS, and names sort as numbers. */
const INDEX_WIDTH = 6;

export const tasksParent = (job: string, id: string) => `${job}/${id}`;
export const execKey = (workspace: string, job: string, id: string): ResourceKey => ({
  kind: EXECUTION_KIND,
  workspace,
  parent: job,
  name: id,
});
export const taskKey = (workspace: string, job: string, id: string, index: number): ResourceKey => ({
  kind: TASK_KIND,
  workspace,
  parent: tasksParent(job, id),
  name: String(index).padStart(INDEX_WIDTH, '0'),
});

/** A new execution id: sortable by creation time (lists come in name order), then random. */
export function newExecutionId(nowMs: number): string {
  return `${nowMs.toString(36).padStart(9, '0')}-${randomBytes(4).toString('hex')}`;
}

export const requestDigest = (body: unknown) =>
  createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 16);
