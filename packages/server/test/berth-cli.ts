// The `berth` CLI run from its TypeScript source (compiled when the suite is) against a server, as a user's shell
// would run it.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { loaderArgs, moduleFile } from '../src/test-support/run-module.js';

const CLI_MAIN = moduleFile(join(import.meta.dirname, '../../cli/src/main.ts'));

export interface CliResult {
  code: number | null;
  /** stdout and stderr interleaved as they came. */
  out: string;
  stdout: string;
  stderr: string;
}

const SCRIPT = `import { main } from ${JSON.stringify(CLI_MAIN)};
main(['node', 'berth', ...process.argv.slice(1)]).catch((e) => { console.error('berth: ' + e.message); process.exit(1); });`;

const envFor = (server: { url: string; adminKey: string }) => ({
  ...process.env,
  BERTH_URL: server.url,
  BERTH_API_KEY: server.adminKey,
  BERTH_CONFIG: '/nonexistent/berth.yaml',
});

/** Runs `berth <args>` logged in to `server` with its admin key (no config file is read). */
export function berth(server: { url: string; adminKey: string }, args: string[]): Promise<CliResult> {
  const child = spawn(process.execPath, [...loaderArgs(), '--input-type=module', '-e', SCRIPT, ...args], {
    env: envFor(server),
  });
  let out = '';
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    out += d;
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    out += d;
    stderr += d;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, stdout, stderr })));
}

/**
 * Runs `berth <args> | head -n <lines>` in bash, as a user reading only the start of the output does: `code` is the
 * CLI's own exit status (PIPESTATUS), `stderr` what it printed there (a closed pipe must end it quietly).
 */
export function berthIntoHead(
  server: { url: string; adminKey: string },
  args: string[],
  lines = 1,
): Promise<{ code: number; stderr: string; head: string }> {
  // The CLI's stderr and, last, its exit status both go to bash's stderr.
  const child = spawn(
    'bash',
    [
      '-c',
      `"$0" --import tsx --input-type=module -e "$1" "\${@:2}" | head -n ${lines}; echo "status \${PIPESTATUS[0]}" >&2`,
      process.execPath,
      SCRIPT,
      ...args,
    ],
    { env: envFor(server) },
  );
  let head = '';
  let err = '';
  child.stdout.on('data', (d) => {
    head += d;
  });
  child.stderr.on('data', (d) => {
    err += d;
  });
  return new Promise((resolve) =>
    child.on('close', () => {
      const m = /status (\d+)\n$/.exec(err);
      resolve({ code: m ? Number(m[1]) : -1, stderr: m ? err.slice(0, m.index) : err, head });
    }),
  );
}
