// The job scheduler's decisions as pure functions (the clock is an argument): which waiting tasks start now
// (per-execution, per-workspace and global caps, fair between executions), what an attempt's end makes of its task (retry
// with backoff, success, failure, timeout, cancelled), and an execution's status from its tasks' statuses.

/** Task statuses on the wire (the SDK's lower-case ones, plus `timeout` for a task killed at its limit). */
export type TaskStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'timeout' | 'cancelled';
export type ExecutionStatus =
  | 'queued'
  | 'pending'
  | 'running'
  | 'cancelling'
  | 'cancelled'
  | 'failed'
  | 'succeeded';

/** First retry waits this long; each later one twice the previous (a flapping dependency gets room). */
export const RETRY_BASE_MS = 500;
/** Backoff never exceeds this: a task retried many times still retries within a minute. */
export const RETRY_MAX_MS = 30_000;

export const isTaskDone = (s: TaskStatus) => s !== 'pending' && s !== 'running';
/** An execution in one of these has ended: nothing of it runs or waits. */
export const isExecutionEnded = (s: ExecutionStatus) =>
  s === 'succeeded' || s === 'failed' || s === 'cancelled';

export interface WaitingTask {
  index: number;
  /** Earliest start (epoch ms) of a retry; absent for a first attempt. */
  notBeforeMs?: number;
}

export interface ExecutionQueue {
  id: string;
  maxConcurrent: number;
  running: number;
  /** Waiting tasks in index order. */
  waiting: WaitingTask[];
  /** The room (in `rooms`) its tasks take from: its workspace's quotas. None: the server's pool only. */
  room?: string;
  /** Memory each of its tasks takes from the room. */
  taskMemoryMb?: number;
}

/** What a workspace's quotas leave for more tasks now: task slots, and memory (decision 040). */
export interface Room {
  slots: number;
  memoryMb: number;
}

/**
 * Picks the tasks to start now: round-robin over the executions (in the order given, oldest first), one task
 * per execution per round, while the execution is under its own cap, its room (its workspace's quotas) has a slot
 * and the memory of one task, and the server is under `globalFree` more. A retry whose backoff has not elapsed is
 * skipped, not waited for. Executions a room held back (with a task ready and their own cap not reached) are
 * added to `held`.
 */
export function pickStarts(
  execs: ExecutionQueue[],
  globalFree: number,
  nowMs: number,
  rooms: ReadonlyMap<string, Room> = new Map(),
  held?: Set<string>,
): { execution: string; index: number }[] {
  const out: { execution: string; index: number }[] = [];
  const left = new Map([...rooms].map(([k, r]) => [k, { ...r }]));
  const state = execs.map((e) => ({
    e,
    running: e.running,
    ready: e.waiting.filter((t) => (t.notBeforeMs ?? 0) <= nowMs),
    next: 0,
  }));
  let free = globalFree;
  for (let progress = true; progress && free > 0; ) {
    progress = false;
    for (const s of state) {
      if (free <= 0) break;
      if (s.running >= s.e.maxConcurrent || s.next >= s.ready.length) continue;
      const room = s.e.room === undefined ? undefined : left.get(s.e.room);
      const memory = s.e.taskMemoryMb ?? 0;
      if (room && (room.slots < 1 || room.memoryMb < memory)) {
        held?.add(s.e.id);
        continue;
      }
      if (room) {
        room.slots--;
        room.memoryMb -= memory;
      }
      out.push({ execution: s.e.id, index: s.ready[s.next++].index });
      s.running++;
      free--;
      progress = true;
    }
  }
  return out;
}

/** When the next retry may start, waiting RETRY_BASE_MS doubled per earlier attempt, capped. */
export function retryAt(nowMs: number, attemptsSoFar: number): number {
  return nowMs + Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.max(0, attemptsSoFar - 1));
}

export interface AttemptEnd {
  exitCode: number;
  /** The attempt ran past the job's timeout and was killed. */
  timedOut: boolean;
  /** The execution is being cancelled. */
  cancelled: boolean;
}

/** What an ended attempt makes of its task: done with a status, or waiting for another attempt. */
export function afterAttempt(
  end: AttemptEnd,
  attempts: number,
  maxRetries: number,
  nowMs: number,
): { status: TaskStatus; notBeforeMs?: number } {
  if (end.cancelled) return { status: 'cancelled' };
  if (!end.timedOut && end.exitCode === 0) return { status: 'succeeded' };
  if (attempts <= maxRetries) return { status: 'pending', notBeforeMs: retryAt(nowMs, attempts) };
  return { status: end.timedOut ? 'timeout' : 'failed' };
}

export type TaskCounts = Record<TaskStatus, number>;

export function countTasks(statuses: Iterable<TaskStatus>): TaskCounts {
  const c: TaskCounts = { pending: 0, running: 0, succeeded: 0, failed: 0, timeout: 0, cancelled: 0 };
  for (const s of statuses) c[s]++;
  return c;
}

/** The execution's status from its tasks' counts: done once no task waits or runs. */
export function executionStatus(c: TaskCounts, cancelling: boolean): ExecutionStatus {
  const live = c.pending + c.running;
  if (cancelling) return live ? 'cancelling' : 'cancelled';
  if (live) return c.running || c.succeeded + c.failed + c.timeout ? 'running' : 'pending';
  return c.failed + c.timeout + c.cancelled ? 'failed' : 'succeeded';
}
