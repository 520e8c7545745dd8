// A host-tool process (exec.ts): the server starts it (up to three) and sends it the host tools to run over the IPC
// channel it inherited; it runs each as its own child and answers with the tool's output or its failure.
// Kept to Node's built-ins: its spawns are the point, and a fork costs in proportion to the process forking.
import { execFile, spawn } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';

/** A tool run to its end. */
export type RunAsk = { id: number; cmd: string; args: string[]; input?: string; timeoutMs: number };
/**
 * A process started in its own session and left running (a sandbox's launch chain): stdout and stderr appended to
 * `logFile`, `data` written to fd 3 (then closed), each of `files` opened read-only on fd 4 onwards.
 */
export type StartAsk = {
  id: number;
  start: {
    cmd: string;
    args: string[];
    env: Record<string, string>;
    logFile: string;
    files: string[];
    data: string;
  };
};
export type ToolAsk = RunAsk | StartAsk;
export type ToolAnswer =
  | { id: number; stdout: string }
  | { id: number; pid: number }
  | { id: number; failed: { stderr: string; exitCode: number | null } };
export type ToolChildMessage = ToolAnswer | { ready: true };

/** The largest output a tool may print (an `nft -j list` of a big table is a few MB). */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

function answer(m: ToolChildMessage) {
  // The server may be gone: its channel's end is this process's end (below).
  if (process.connected) process.send?.(m);
}

function runTool(ask: RunAsk) {
  const failed = (err: Error & { code?: unknown }, stderr?: unknown) =>
    answer({
      id: ask.id,
      failed: {
        stderr: String(stderr || err.message),
        exitCode: typeof err.code === 'number' ? err.code : null,
      },
    });
  try {
    const child = execFile(
      ask.cmd,
      ask.args,
      { timeout: ask.timeoutMs, maxBuffer: MAX_OUTPUT_BYTES },
      (err, stdout, stderr) => (err ? failed(err, stderr) : answer({ id: ask.id, stdout: String(stdout) })),
    );
    child.stdin?.on('error', () => undefined); // a tool that exits without reading its input
    if (ask.input !== undefined) child.stdin?.end(ask.input);
  } catch (err) {
    // Arguments execFile refuses before spawning (a NUL byte): this command fails, the process goes on.
    failed(err as Error);
  }
}

function startDetached({ id, start }: StartAsk) {
  const fds: number[] = [];
  try {
    const log = openSync(start.logFile, 'a', 0o600);
    fds.push(log);
    const files = start.files.map((f) => {
      const fd = openSync(f, constants.O_RDONLY);
      fds.push(fd);
      return fd;
    });
    const child = spawn(start.cmd, start.args, {
      detached: true,
      stdio: ['ignore', log, log, 'pipe', ...files],
      env: start.env,
    });
    if (!child.pid) throw new Error(`could not spawn ${start.cmd}`);
    const data = child.stdio[3] as NodeJS.WritableStream & { unref?: () => void };
    data.on('error', () => undefined); // the process died early; its caller finds out from its log
    data.end(Buffer.from(start.data));
    data.unref?.();
    child.on('error', () => undefined);
    child.unref(); // still reaped here when it ends
    answer({ id, pid: child.pid });
  } catch (err) {
    answer({ id, failed: { stderr: (err as Error).message, exitCode: null } });
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}

process.on('message', (ask: ToolAsk) => ('start' in ask ? startDetached(ask) : runTool(ask)));
// The channel closes when the server stops or dies, however it does: nothing is left to answer. That is its only
// end: a Ctrl-C or a service manager's SIGTERM reaches the server's whole process group, and the server's own stop
// still runs host tools (pools torn down) after it.
process.on('disconnect', () => process.exit(0));
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
answer({ ready: true });
