// The logs of ended job task attempts, kept in the store too when several servers share it (a cluster). The leader of
// the controllers writes each task's log file on its own disk (job-runner.ts keepLog); a new leader would have none
// of them, so the logs of every attempt ended before a failover would read empty. With the outcome of each attempt,
// the runner stores the task's log text (its last TASK_LOG_KEPT_BYTES) in the same write; a server that lacks the
// file, or holds an older one (it led before, and attempts ended elsewhere since), writes it back from the store
// before reading or following it.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ResourceKey, Store, WriteOp } from '../../store/store.js';
import { tasksParent } from './job-store.js';

export const TASK_LOG_KIND = 'JobTaskLog';
/** What the store keeps of a task's log: its end (a task's attempts each keep at most their last 2 MB). */
export const TASK_LOG_KEPT_BYTES = 4 * 1024 * 1024;

export const taskLogKey = (workspace: string, job: string, id: string, index: number): ResourceKey => ({
  kind: TASK_LOG_KIND,
  workspace,
  parent: tasksParent(job, id),
  name: String(index).padStart(6, '0'),
});

interface TaskLogBody {
  /** The last attempt the text has. */
  attempt: number;
  text: string;
}

/** The last attempt a log's text has a section of (`--- attempt N ---`), 0 for none. */
export function lastAttempt(text: string): number {
  const all = [...text.matchAll(/^--- attempt (\d+) ---$/gm)];
  return all.length ? Number(all[all.length - 1][1]) : 0;
}

/** The end of `text` that fits TASK_LOG_KEPT_BYTES, from a line's start. */
function kept(text: string): string {
  if (Buffer.byteLength(text) <= TASK_LOG_KEPT_BYTES) return text;
  const tail = Buffer.from(text).subarray(-TASK_LOG_KEPT_BYTES).toString('utf8');
  const nl = tail.indexOf('\n');
  return `[earlier output not kept]\n${nl >= 0 ? tail.slice(nl + 1) : tail}`;
}

/** The op that stores the log file's text as of `attempt`, to be written with that attempt's outcome. */
export async function storeLogOp(
  store: Store,
  key: ResourceKey,
  file: string,
  attempt: number,
): Promise<WriteOp> {
  const body: TaskLogBody = { attempt, text: kept(existsSync(file) ? readFileSync(file, 'utf8') : '') };
  // The leader alone writes it (its fenced store): nobody creates it between this read and the write.
  const cur = await store.get(key);
  return cur ? { op: 'update', key, body, expectVersion: cur.resourceVersion } : { op: 'create', key, body };
}

/**
 * Writes the stored log back to `file` when the store has attempts the file does not (a failover, or this server led
 * before and attempts ended on another leader since). No stored log: the file is left as it is.
 */
export async function restoreLog(store: Store, key: ResourceKey, file: string): Promise<void> {
  const o = await store.get(key);
  const stored = o?.body as TaskLogBody | undefined;
  if (!stored?.text) return;
  const here = existsSync(file) ? lastAttempt(readFileSync(file, 'utf8')) : 0;
  if (stored.attempt <= here) return;
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, stored.text);
}
