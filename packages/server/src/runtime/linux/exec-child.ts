// The host-tool process (exec.ts): the server starts it once and sends it the host tools to run over the IPC
// channel it inherited; it runs each as its own child and answers with the tool's output or its failure.
// Kept to Node's built-ins: its spawns are the point, and a fork costs in proportion to the process forking.
import { execFile } from 'node:child_process';

export type ToolAsk = { id: number; cmd: string; args: string[]; input?: string; timeoutMs: number };
export type ToolAnswer =
  | { id: number; stdout: string }
  | { id: number; failed: { stderr: string; exitCode: number | null } };
export type ToolChildMessage = ToolAnswer | { ready: true };

/** The largest output a tool may print (an `nft -j list` of a big table is a few MB). */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

function answer(m: ToolChildMessage) {
  // The server may be gone: its channel's end is this process's end (below).
  if (process.connected) process.send?.(m);
}

function runTool(ask: ToolAsk) {
  const child = execFile(
    ask.cmd,
    ask.args,
    { timeout: ask.timeoutMs, maxBuffer: MAX_OUTPUT_BYTES },
    (err, stdout, stderr) => {
      if (!err) return answer({ id: ask.id, stdout: String(stdout) });
      const exitCode = typeof err.code === 'number' ? err.code : null;
      answer({ id: ask.id, failed: { stderr: String(stderr || err.message), exitCode } });
    },
  );
  child.stdin?.on('error', () => undefined); // a tool that exits without reading its input
  if (ask.input !== undefined) child.stdin?.end(ask.input);
}

process.on('message', (ask: ToolAsk) => runTool(ask));
// The channel closes when the server stops or dies, however it does: nothing is left to answer.
process.on('disconnect', () => process.exit(0));
answer({ ready: true });
