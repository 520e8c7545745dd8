// Runs a script that uses the unmodified @blaxel/core SDK, in its own process, pointed at a Berth server.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The SDK's environment of docs/compat.md, from an empty cwd and HOME: the SDK also reads `.env`,
 * `blaxel.toml` and `~/.blaxel/config.yaml`, which would override it. Returns the script's stdout.
 */
export async function runBlaxelScript(
  script: string,
  server: { url: string; adminKey: string },
  env: Record<string, string> = {},
  timeoutMs = 90_000,
  args: string[] = [],
): Promise<string> {
  const home = mkdtempSync(join(tmpdir(), 'blaxel-home-'));
  try {
    const { stdout } = await run(process.execPath, [script, ...args], {
      cwd: home,
      env: {
        PATH: process.env.PATH,
        HOME: home,
        BL_API_URL: `${server.url}/v0`,
        BL_RUN_URL: `${server.url}/run`,
        BL_WORKSPACE: 'default',
        BL_API_KEY: server.adminKey,
        BL_DISABLE_H2: 'true',
        ...env,
      },
      timeout: timeoutMs,
    });
    return stdout;
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
