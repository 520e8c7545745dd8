// The daemon's configuration, read once from its environment at start.
import { existsSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';

export const SANDBOX_API_VERSION = '0.1.0';

/** Where the daemon runs in a Berth sandbox when nothing else is said. */
const DEFAULT_WORKDIR = '/home/user';

export interface DaemonConfig {
  /** Unix socket to listen on (BERTH_SANDBOX_SOCKET); wins over `port`. */
  socket?: string;
  /** TCP port on 127.0.0.1 (BERTH_SANDBOX_PORT; 0 = any free port). */
  port?: number;
  /** Relative paths and processes without a workingDir start here. */
  workdir: string;
  /** `~` in a path. */
  home: string;
  /** When set, no path outside this directory is ever read or written (used when run outside a sandbox). */
  root?: string;
  version: string;
  /** BERTH_SANDBOX_EXIT_WITH_PARENT=1: stop when the process that started the daemon goes away. */
  exitWithParent: boolean;
  /** BERTH_SANDBOX_WARM_UP=1 (a warm pool's sandbox): run the process path once before listening (warm-up.ts). */
  warmUp: boolean;
}

export function loadDaemonConfig(env: NodeJS.ProcessEnv = process.env): DaemonConfig {
  const root = env.BERTH_SANDBOX_ROOT ? realpathSync(resolve(env.BERTH_SANDBOX_ROOT)) : undefined;
  const workdir = resolve(
    env.BERTH_SANDBOX_WORKDIR || (root ?? (isDir(DEFAULT_WORKDIR) ? DEFAULT_WORKDIR : process.cwd())),
  );
  const port =
    env.BERTH_SANDBOX_PORT !== undefined && env.BERTH_SANDBOX_PORT !== ''
      ? Number(env.BERTH_SANDBOX_PORT)
      : undefined;
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535))
    throw new Error(`BERTH_SANDBOX_PORT must be a port number, got ${env.BERTH_SANDBOX_PORT}`);
  if (!env.BERTH_SANDBOX_SOCKET && port === undefined)
    throw new Error(
      'set BERTH_SANDBOX_SOCKET (a unix socket path) or BERTH_SANDBOX_PORT (a TCP port on 127.0.0.1)',
    );
  return {
    socket: env.BERTH_SANDBOX_SOCKET || undefined,
    port,
    workdir,
    home: env.HOME || homedir(),
    root,
    version: env.BERTH_SANDBOX_VERSION || SANDBOX_API_VERSION,
    exitWithParent: env.BERTH_SANDBOX_EXIT_WITH_PARENT === '1',
    warmUp: env.BERTH_SANDBOX_WARM_UP === '1',
  };
}

function isDir(p: string): boolean {
  return existsSync(p) && statSync(p).isDirectory();
}
