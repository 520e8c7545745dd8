// How long the CLI takes to answer: `berth get policies` (and `berth --help`, which asks no server) against a local
// server, each run beside a bare `node -e 0` of the same moment — runs alternate, so a busy host slows both alike.
// The target (issue 32): a `get` answers within 0.3 s of the bare start.
import { spawnSync } from 'node:child_process';
import { startBerth } from '../lib/berth.mjs';
import { header, row } from '../lib/report.mjs';

const BIN = new URL('../../packages/cli/bin/berth.mjs', import.meta.url).pathname;
/** Runs of each command; the median is reported. */
const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 21);
/** How far above a bare Node start a `get` may answer. */
const TARGET_MS = 300;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function timed(args, env) {
  const t = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed: ${r.stderr}`);
  return ms;
}

export async function benchCliStart() {
  header('CLI start (wall time of one command, median)');
  const b = await startBerth();
  try {
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      BERTH_URL: b.url,
      BERTH_API_KEY: b.key,
      BERTH_CONFIG: '/nonexistent/berth.yaml',
    };
    timed([BIN, 'get', 'policies'], env); // the first run fills the disk cache
    const bare = [];
    const get = [];
    const help = [];
    for (let i = 0; i < RUNS; i++) {
      bare.push(timed(['-e', '0'], env));
      get.push(timed([BIN, 'get', 'policies'], env));
      help.push(timed([BIN, '--help'], env));
    }
    const base = median(bare);
    row('berth get policies', median(get), base, 'ms', `≤ node -e 0 + ${TARGET_MS} ms`);
    row('berth --help', median(help), base, 'ms');
    console.log(
      `berth get policies answers ${(median(get) - base).toFixed(0)} ms above a bare node start (target ≤ ${TARGET_MS} ms)`,
    );
  } finally {
    await b.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchCliStart();
