// `berth serve` as its own process on a data dir, for the tests that kill it with SIGKILL and start it again.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '../../cli/bin/berth.mjs');

/**
 * Starts `berth serve` on a free port (`env`: settings of its own); resolves with its URL once it listens (rejects
 * if it exits first).
 */
export async function serve(
  dataDir: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  // BENCH_BERTH_NODE_ARGS: Node options for the server only, as bench/lib/berth.mjs takes them (a cluster bench's
  // servers profiled with `--cpu-prof --cpu-prof-dir=…`).
  const nodeArgs = (process.env.BENCH_BERTH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
    // As the in-process test servers: a small warm pool (test-support/server.ts).
    env: { ...process.env, BERTH_LOG_LEVEL: 'warn', BERTH_WARM_POOL: '1', BERTH_WARM_POOL_MAX: '2', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr?.on('data', (d) => {
    err += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`berth serve exited with ${code}: ${err}`)));
    child.stdout?.on('data', (d) => {
      out += d;
      const m = /berth listening on (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
  });
  child.removeAllListeners('exit');
  // What it said on stderr, its last 16 kB (why it exited, when it did).
  return { child, url, stderr: () => err.slice(-16_384) };
}

/** Resolves once the process has exited (at once if it already has). */
export const stopped = (c: ChildProcess) =>
  new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r)));
