// bench/sandboxes density: many sandboxes created, then left to go to standby. Reports what each costs:
// Berth's own memory (the server's RSS) per sandbox, the memory charged to each sandbox's cgroup, and how
// much the host's available memory went down. Baselines: the same figures before any sandbox exists, and
// what the kernel charges each sandbox's own cgroup.
import { readFileSync } from 'node:fs';
import { header, row } from '../lib/report.mjs';
import { DENSE_MEMORY_MB, startSandboxBerth } from './lib.mjs';

/** 200 by default; on a small host set BENCH_DENSITY=50 (the report says which count ran). */
const COUNT = Number(process.env.BENCH_DENSITY ?? 200);
const CONCURRENCY = 4;

const availableMb = () =>
  Number(/MemAvailable:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) / 1024;
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

export async function benchDensity() {
  // COUNT sandboxes of DENSE_MEMORY_MB are past the default quotas (memory and count), which are not what is measured.
  const berth = await startSandboxBerth({
    BERTH_STANDBY_AFTER: '1',
    BERTH_QUOTA_MEMORY_MB: '100000000',
    BERTH_QUOTA_SANDBOXES: '100000',
  });
  const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
  const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
  try {
    await berth.create('warm-up', { runtime: { memory: DENSE_MEMORY_MB } });
    await berth.call('DELETE', '/v0/sandboxes/warm-up');
    await new Promise((r) => setTimeout(r, 1000));
    const before = { rss: rssMb(berth.pid), avail: availableMb() };
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < COUNT; i = next++)
          await berth.create(`dense-${i}`, { runtime: { memory: DENSE_MEMORY_MB } });
      }),
    );
    const createS = (performance.now() - started) / 1000;
    for (let i = 0; i < 600; i++) {
      const list = await berth.call('GET', '/v0/sandboxes?limit=1000');
      if (list.filter((s) => s.state === 'STANDBY').length >= COUNT) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const infos = (await driver.list()).filter((s) => s.id.startsWith('default.dense-'));
    const frozen = infos.filter((s) => s.state === 'frozen').length;
    let charged = 0;
    for (const s of infos) charged += ((await driver.stats(s.id))?.memoryBytes ?? 0) / 1024 / 1024;
    const after = { rss: rssMb(berth.pid), avail: availableMb() };
    header(
      `sandboxes: density (${COUNT} sandboxes, ${frozen} in standby; created in ${createS.toFixed(1)} s)`,
    );
    const hostPer = (before.avail - after.avail) / COUNT;
    row('Berth server RSS (baseline: before)', after.rss, before.rss, 'MB');
    row('host available memory (baseline: before)', after.avail, before.avail, 'MB');
    row('host memory per sandbox (baseline: its cgroup)', hostPer, charged / COUNT, 'MB');
    row("Berth's own memory per sandbox (vs host's)", (after.rss - before.rss) / COUNT, hostPer, 'MB');
    await berth.removeAll();
    return { perSandboxMb: hostPer };
  } finally {
    await driver.close();
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchDensity();
