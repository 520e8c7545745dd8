// Turns a validated POST /process body into what the process manager runs: resolved working directory, the
// environment (the sandbox's own, minus the daemon's settings, plus the request's), timeouts in milliseconds.
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { SandboxApi } from '../context.js';
import { badRequest } from '../http.js';
import type { ProcessRequest } from '../schema.js';
import { DEFAULT_MAX_RESTARTS, type ProcessSpec } from './managed-process.js';
import { KEEPALIVE_DEFAULT_TIMEOUT_S } from './manager.js';

/** Variables that configure the daemon itself; a user's process has no use for them. */
const DAEMON_ENV_PREFIX = 'BERTH_SANDBOX_';

let baseEnv: NodeJS.ProcessEnv | undefined;
let fileEnv: { ino: number; mtimeMs: number; env: NodeJS.ProcessEnv } | undefined;

/**
 * The sandbox's environment: what the daemon received (minus its own settings), then the runtime's env file
 * (BERTH_SANDBOX_ENV_FILE) on top. A pre-started (warm) sandbox learns its spec's envs only from that file,
 * written when it is assigned, so the file is re-read whenever it changes (one stat per process start).
 */
export function sandboxEnv(): NodeJS.ProcessEnv {
  if (!baseEnv) {
    baseEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith(DAEMON_ENV_PREFIX)) baseEnv[k] = v;
  }
  const file = process.env.BERTH_SANDBOX_ENV_FILE;
  if (!file) return baseEnv;
  const st = statSync(file, { throwIfNoEntry: false });
  if (!st) return baseEnv;
  // Each write renames a new file into place: a new inode, even within one (coarse) mtime tick.
  if (fileEnv?.ino !== st.ino || fileEnv.mtimeMs !== st.mtimeMs) {
    try {
      const parsed = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      const env: NodeJS.ProcessEnv = { ...baseEnv };
      for (const [k, v] of Object.entries(parsed))
        if (typeof v === 'string' && !k.startsWith(DAEMON_ENV_PREFIX)) env[k] = v;
      fileEnv = { ino: st.ino, mtimeMs: st.mtimeMs, env };
    } catch {
      return fileEnv?.env ?? baseEnv; // being replaced: keep what was last read whole
    }
  }
  return fileEnv.env;
}

export async function buildSpec(api: SandboxApi, r: ProcessRequest): Promise<ProcessSpec> {
  const workingDir = r.workingDir ? await api.paths.resolve(r.workingDir) : api.config.workdir;
  const st = await stat(workingDir).catch(() => undefined);
  if (!st?.isDirectory()) throw badRequest(`workingDir ${workingDir} is not an existing directory`);
  const keepAlive = r.keepAlive === true;
  // keepAlive defaults to a bounded hold (the SDK's documented 600 s); an explicit 0 means no limit.
  const timeoutS = r.timeout ?? (keepAlive ? KEEPALIVE_DEFAULT_TIMEOUT_S : 0);
  const restartOnFailure = r.restartOnFailure === true;
  const maxRestarts =
    r.maxRestarts === undefined || r.maxRestarts === 0
      ? restartOnFailure
        ? DEFAULT_MAX_RESTARTS
        : 0
      : r.maxRestarts;
  return {
    command: r.command,
    // An unnamed process gets a name as the service's daemon gives one, so the answer names it for later calls.
    name: r.name || `proc-${randomBytes(4).toString('hex')}`,
    workingDir,
    env: r.env ? { ...sandboxEnv(), ...r.env } : sandboxEnv(),
    timeoutMs: Math.round(timeoutS * 1000),
    keepAlive,
    restartOnFailure,
    maxRestarts: Math.trunc(maxRestarts),
    stdin: r.stdin ?? false,
  };
}
