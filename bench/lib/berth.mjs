// Starts `berth serve` as a child process on a free port with a fresh data dir; returns its URL and admin key.
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = new URL('../../packages/cli/bin/berth.mjs', import.meta.url).pathname;

export async function startBerth(env = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-'));
  // BENCH_BERTH_NODE_ARGS passes Node options to the server only (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
  const nodeArgs = (process.env.BENCH_BERTH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
    env: { ...process.env, BERTH_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // The server logs to stderr: kept for `log()`, and passed on except info and below (a bench may ask for info).
  let log = '';
  let partial = '';
  child.stderr.on('data', (d) => {
    log += d;
    const lines = (partial + d).split('\n');
    partial = lines.pop();
    for (const line of lines) {
      const level = /^\{"level":(\d+)/.exec(line)?.[1];
      if (line && (!level || Number(level) >= 40)) process.stderr.write(`${line}\n`);
    }
  });
  // BENCH_BERTH_LOG=<file> keeps the server's log (its stdout) for a look after the run.
  if (process.env.BENCH_BERTH_LOG)
    child.stdout.pipe(createWriteStream(process.env.BENCH_BERTH_LOG, { flags: 'a' }));
  let out = '';
  const { url, key } = await new Promise((resolve, reject) => {
    child.on('exit', (c) => reject(new Error(`berth serve exited with ${c}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const u = /berth listening on (\S+)/.exec(out);
      const k = /admin API key[^:]*: (\S+)/.exec(out);
      if (u && k) resolve({ url: u[1], key: k[1] });
    });
  });
  child.removeAllListeners('exit');
  return {
    url,
    key,
    dataDir,
    pid: child.pid,
    /** The server's log so far (its stderr: the lines BERTH_LOG_LEVEL lets through). */
    log: () => log,
    async stop() {
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await done;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Runs a child Node script that prints `listening <url>` and returns its URL. */
export async function startScript(path, env = {}) {
  const child = spawn(process.execPath, [path], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.on('exit', (c) => reject(new Error(`${path} exited with ${c}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
  });
  child.removeAllListeners('exit');
  return {
    url,
    pid: child.pid,
    async stop() {
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await done;
    },
  };
}
