// Runs host tools (ip, nft, mount) as child processes; failures carry the tool's own message.
import { execFile } from 'node:child_process';

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly stderr: string,
    readonly exitCode: number | null,
  ) {
    super(`${command} failed (${exitCode}): ${stderr.trim()}`);
    this.name = 'CommandError';
  }
}

/** A host tool should answer in well under this; a hang must not wedge a reconcile forever. */
const COMMAND_TIMEOUT_MS = 15_000;

export function run(cmd: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      { timeout: COMMAND_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          const code = typeof err.code === 'number' ? err.code : null;
          reject(new CommandError(`${cmd} ${args.join(' ')}`, String(stderr || err.message), code));
        } else resolve(String(stdout));
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
