// bench/sandboxes create: POST /v0/sandboxes, then the first exec (`true`) through the gateway, as a client
// sees it; baseline a bare `bwrap --unshare-all ... true` spawn in the same run. Targets (issue 28): a single create
// <= 10 ms p50; 20 back to back <= 30 ms p50 and <= 60 ms p99.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { header, row } from '../lib/report.mjs';
import { percentile, startSandboxBerth, timed } from './lib.mjs';

const N = Number(process.env.BENCH_CREATES ?? 20);
/** The burst's length (default N): longer than the warm pool, it measures the creates that start cold. */
const BURST = Number(process.env.BENCH_CREATE_BURST ?? N);
/** BENCH_CREATE_TRACE=1 prints each burst create's POST and first exec, and the warm pool's entries as it began. */
const TRACE = process.env.BENCH_CREATE_TRACE === '1';
/** Pause between spaced creates: long enough for the runtime to start a replacement warm sandbox. */
const GAP_MS = 1000;

const BWRAP = [
  '--unshare-all',
  '--ro-bind',
  '/usr',
  '/usr',
  '--symlink',
  'usr/lib',
  '/lib',
  '--symlink',
  'usr/lib64',
  '/lib64',
  '--symlink',
  'usr/bin',
  '/bin',
  '--proc',
  '/proc',
  '--dev',
  '/dev',
  '--',
  '/usr/bin/true',
];

const bwrapOnce = () =>
  new Promise((resolve, reject) => {
    const c = spawn('bwrap', BWRAP, { stdio: 'ignore' });
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bwrap exited ${code}`))));
  });

export async function benchCreate() {
  // 2 × 20 sandboxes of 2 GB are kept until the end: past the default quotas, which are not what is measured.
  const berth = await startSandboxBerth({
    BERTH_STANDBY_AFTER: '600',
    BERTH_QUOTA_MEMORY_MB: '1000000',
    BERTH_QUOTA_SANDBOXES: '1000',
  });
  try {
    const warmDir = join(berth.dataDir, 'warm');
    const trace = [];
    const sample = async (name) => {
      // Ready and being started: the server's warm pool directory holds one entry for each.
      const warm = TRACE && existsSync(warmDir) ? readdirSync(warmDir).length : undefined;
      let posted = 0;
      const ms = await timed(async () => {
        posted = await timed(() => berth.create(name));
        const p = await berth.call('POST', `${berth.sandboxPath(name)}/process`, {
          command: 'true',
          waitForCompletion: true,
        });
        if (p.exitCode !== 0) throw new Error(`exec failed: ${JSON.stringify(p)}`);
      });
      if (TRACE && name.startsWith('burst-'))
        trace.push(`${posted.toFixed(1)}+${(ms - posted).toFixed(1)}[${warm}]`);
      return ms;
    };
    await sample('warm-up'); // opens the runtime (host setup) once
    // Spaced like interactive use (a burst is measured apart): the runtime refills its pool of
    // pre-started sandboxes between creates.
    const times = [];
    for (let i = 0; i < N; i++) {
      await new Promise((r) => setTimeout(r, GAP_MS));
      times.push(await sample(`create-${i}`));
    }
    const burst = [];
    for (let i = 0; i < BURST; i++) burst.push(await sample(`burst-${i}`));
    const base = [];
    for (let i = 0; i < N; i++) base.push(await timed(bwrapOnce));
    header(
      `sandboxes: create -> first exec completed (${N} sandboxes ${GAP_MS} ms apart, then ${BURST} back to back)`,
    );
    if (TRACE) console.log(`burst, ms POST + first exec [warm pool entries]: ${trace.join(' ')}`);
    const ratio = row(
      'create + first exec p50',
      percentile(times, 50),
      percentile(base, 50),
      'ms',
      '<= 10 ms',
    );
    row('create + first exec p99', percentile(times, 99), percentile(base, 99), 'ms');
    row('same, back-to-back burst p50', percentile(burst, 50), percentile(base, 50), 'ms', '<= 30 ms');
    row('same, back-to-back burst p99', percentile(burst, 99), percentile(base, 99), 'ms', '<= 60 ms');
    await berth.removeAll();
    return { p50: percentile(times, 50), ratio };
  } finally {
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchCreate();
