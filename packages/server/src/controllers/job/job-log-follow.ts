// Follows one job task's log while it runs: the attempts already kept in the task's log file, then the running
// attempt's output live from the in-sandbox daemon (GET /process/task/logs/stream), and so on through retries
// until the task ends. An attempt streamed live is skipped when its section later lands in the log file, so
// every attempt's output is written once.
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { DaemonClient } from '../../sandbox-api/client.js';
import { isTaskDone, type TaskStatus } from './job-decide.js';
import { TASK_PROCESS } from './job-task.js';

/** How often a followed task's state is looked at between attempts (a retry's backoff, a sandbox starting). */
export const FOLLOW_POLL_MS = 250;

export interface FollowedTask {
  status: TaskStatus;
  attempts: number;
  sandbox?: string;
  /** The node of the cluster its running attempt is placed on, when not this server (decision 093). */
  node?: string;
}

export interface LogFollowDeps {
  logFile: string;
  /** The task's state as the runner holds it; undefined once its execution has ended. */
  state: () => FollowedTask | undefined;
  /** The daemon socket of a running sandbox, or undefined. */
  socketOf: (sandbox: string) => Promise<string | undefined>;
  /**
   * Streams the live output of the attempt running in `sandbox` on another node, as DaemonClient.logStream does
   * here (false: nothing to stream yet); none: such an attempt's output shows once it has ended.
   */
  remote?: (
    node: string,
    sandbox: string,
    write: (text: string) => void,
    signal: AbortSignal,
    onOpen: () => void,
  ) => Promise<boolean>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes the task's log to `write` until the task has ended (or `signal` aborts). */
export async function followTaskLog(
  deps: LogFollowDeps,
  write: (text: string) => void,
  signal: AbortSignal,
): Promise<void> {
  let offset = 0;
  const live = new Set<number>();
  const fromFile = () => {
    const { text, next } = readFrom(deps.logFile, offset);
    offset = next;
    if (text) write(withoutSections(text, live));
  };
  while (!signal.aborted) {
    fromFile();
    const t = deps.state();
    if (!t || isTaskDone(t.status)) {
      fromFile();
      return;
    }
    if (t.status === 'running' && t.sandbox && !live.has(t.attempts)) {
      const attempt = t.attempts;
      const onOpen = () => {
        live.add(attempt);
        write(`--- attempt ${attempt} ---\n`);
      };
      // False when the daemon has no task process yet (still starting) or cannot be reached: look again later.
      let streamed = false;
      if (t.node) streamed = (await deps.remote?.(t.node, t.sandbox, write, signal, onOpen)) ?? false;
      else {
        const socket = await deps.socketOf(t.sandbox);
        if (socket)
          streamed = await DaemonClient.at(socket).logStream(TASK_PROCESS, write, signal, { onOpen });
      }
      if (streamed) continue;
    }
    await sleep(FOLLOW_POLL_MS);
  }
}

/** The file's bytes from `offset` (whole sections: the runner appends each attempt in one write). */
function readFrom(file: string, offset: number): { text: string; next: number } {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    return { text: '', next: offset };
  }
  if (size <= offset) return { text: '', next: offset };
  const buf = Buffer.alloc(size - offset);
  const fd = openSync(file, 'r');
  try {
    const n = readSync(fd, buf, 0, buf.length, offset);
    return { text: buf.subarray(0, n).toString('utf8'), next: offset + n };
  } finally {
    closeSync(fd);
  }
}

/** Drops the `--- attempt n ---` sections of attempts already streamed live. */
export function withoutSections(text: string, skip: Set<number>): string {
  if (!skip.size) return text;
  const parts = text.split(/^(?=--- attempt \d+ ---\n)/m);
  return parts.filter((p) => !skip.has(Number(/^--- attempt (\d+) ---\n/.exec(p)?.[1] ?? -1))).join('');
}
