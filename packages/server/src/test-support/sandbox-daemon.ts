// Starts the sandbox API daemon as a real child process on 127.0.0.1 (a free port) with its root jailed to a fresh
// temp directory, for the sandbox-api tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loaderArgs, moduleFile } from './run-module.js';

const here = dirname(fileURLToPath(import.meta.url));
const REPO = join(here, '..', '..', '..', '..');
const DAEMON = moduleFile(join(here, '..', 'sandbox-api', 'daemon.ts'));
/** Starting through tsx takes a moment on a loaded machine. */
const START_TIMEOUT_MS = 30_000;

export interface TestDaemon {
  url: string;
  /** The jail root, also the working directory and $HOME. */
  root: string;
  child: ChildProcess;
  stderr(): string;
  /** fetch against the daemon; `json` is sent as a JSON body. */
  fetch(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
  close(): Promise<void>;
}

export async function startSandboxDaemon(env: Record<string, string> = {}): Promise<TestDaemon> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'berth-sbx-')));
  const child = spawn(process.execPath, [...loaderArgs(), DAEMON], {
    cwd: REPO,
    env: {
      ...process.env,
      BERTH_SANDBOX_PORT: '0',
      BERTH_SANDBOX_ROOT: root,
      BERTH_SANDBOX_EXIT_WITH_PARENT: '1',
      HOME: root,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`daemon did not start: ${err}`)), START_TIMEOUT_MS);
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"listening"'));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line).url);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited with ${code}: ${err}`));
    });
  });
  return {
    url,
    root,
    child,
    stderr: () => err,
    fetch(path, init = {}) {
      const { json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (json !== undefined) headers.set('content-type', 'application/json');
      return fetch(url + path, {
        ...rest,
        headers,
        body: json !== undefined ? JSON.stringify(json) : rest.body,
      });
    },
    async close() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Encodes a wire path the way the SDK does (`/tmp/a` → `%2Ftmp%2Fa`). */
export const enc = (p: string) => encodeURIComponent(p);
