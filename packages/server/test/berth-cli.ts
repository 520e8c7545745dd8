// The `berth` CLI run from its TypeScript source against a server, as a user's shell would run it.
import { spawn } from 'node:child_process';
import { join } from 'node:path';

const CLI_MAIN = join(import.meta.dirname, '../../cli/src/main.ts');

export interface CliResult {
  code: number | null;
  /** stdout and stderr interleaved as they came. */
  out: string;
  stdout: string;
  stderr: string;
}

/** Runs `berth <args>` logged in to `server` with its admin key (no config file is read). */
export function berth(server: { url: string; adminKey: string }, args: string[]): Promise<CliResult> {
  const script = `import { main } from ${JSON.stringify(CLI_MAIN)};
main(['node', 'berth', ...process.argv.slice(1)]).catch((e) => { console.error('berth: ' + e.message); process.exit(1); });`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, ...args], {
    env: {
      ...process.env,
      BERTH_URL: server.url,
      BERTH_API_KEY: server.adminKey,
      BERTH_CONFIG: '/nonexistent/berth.yaml',
    },
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
