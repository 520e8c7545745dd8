// bench/sandboxes exec: round trip of a synchronous `true` through Berth (gateway, auth, proxy, the sandbox's
// daemon spawning it); baseline child_process.spawn('true') on the host in the same run. Target p50 <= 5 ms.
import { spawn } from 'node:child_process';
import { header, row } from '../lib/report.mjs';
import { percentile, startSandboxBerth, timed } from './lib.mjs';

const N = Number(process.env.BENCH_EXECS ?? 500);

const spawnTrue = () =>
  new Promise((resolve, reject) => {
    const c = spawn('true', { stdio: 'ignore' });
    c.on('error', reject);
    c.on('exit', resolve);
  });

export async function benchExec() {
  const berth = await startSandboxBerth({ BERTH_STANDBY_AFTER: '600' });
  try {
    await berth.create('exec-bench');
    const path = `${berth.sandboxPath('exec-bench')}/process`;
    const once = async () => {
      const p = await berth.call('POST', path, { command: 'true', waitForCompletion: true });
      if (p.exitCode !== 0) throw new Error(`exec failed: ${JSON.stringify(p)}`);
    };
    for (let i = 0; i < 50; i++) await once(); // warm-up: connections, JIT
    const times = [];
    for (let i = 0; i < N; i++) times.push(await timed(once));
    const base = [];
    for (let i = 0; i < N; i++) base.push(await timed(spawnTrue));
    header(`sandboxes: exec round trip (\`true\`, synchronous, ${N} sequential)`);
    const ratio = row('exec RTT p50', percentile(times, 50), percentile(base, 50), 'ms', '<= 5 ms');
    row('exec RTT p99', percentile(times, 99), percentile(base, 99), 'ms');
    await berth.removeAll();
    return { p50: percentile(times, 50), ratio };
  } finally {
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchExec();
