// bench/sandboxes deep-standby: N sandboxes, each running a process that holds 20 MB of known bytes and a counter,
// left to go to standby and then to deep standby (memory pushed out to swap, decision 058). Reports the host memory
// each still holds (MemAvailable delta / N; goal <= 1 MiB) against what each held awake (its cgroup's charge), what
// is left in its cgroup and in Berth's own RSS, the wake p50/p99 of a random sample (a request through the gateway
// to a deep sandbox; goal p50 <= 50 ms) against the same request to an awake sandbox, and checks that every sampled
// process's 20 MB and counter came back byte-exact. N stops at BENCH_DEEP_N (default 200) or when creating has
// taken BENCH_DEEP_SECONDS (default 240): the report says which. BERTH_DEEP_STANDBY_DAEMON=resident keeps each
// sandbox API daemon resident (decision 058, second pass): run both to compare.
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { header, row } from '../lib/report.mjs';
import { DENSE_MEMORY_MB, percentile, startSandboxBerth, timed } from './lib.mjs';

const MAX_N = Number(process.env.BENCH_DEEP_N ?? 200);
const BUDGET_S = Number(process.env.BENCH_DEEP_SECONDS ?? 240);
const SAMPLE = Number(process.env.BENCH_DEEP_SAMPLE ?? 200);
const DEEP_AFTER_S = 5;
const CONCURRENCY = 2;
const HOLDER_MB = 20;

const availableMb = () =>
  Number(/MemAvailable:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) / 1024;
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** 20 MB of bytes from a pattern, its sha256 in /workspace/expect; SIGUSR1 writes the sha256 and counter again. */
const HOLDER =
  `node -e 'const fs=require("fs"),c=require("crypto");const b=Buffer.alloc(${HOLDER_MB}<<20);` +
  'for(let i=0;i<b.length;i++)b[i]=(i*131+7)&255;' +
  'const h=()=>c.createHash("sha256").update(b).digest("hex");let n=0;' +
  'fs.writeFileSync("/workspace/pid",String(process.pid));fs.writeFileSync("/workspace/expect",h());' +
  'process.on("SIGUSR1",()=>fs.writeFileSync("/workspace/check",h()+" "+n));setInterval(()=>n++,100)\'';

export async function benchDeepStandby() {
  const swapMb = Math.ceil((MAX_N * (HOLDER_MB + 12)) / 1024) * 1024 + 1024;
  const berth = await startSandboxBerth({
    BERTH_STANDBY_AFTER: '1',
    BERTH_DEEP_STANDBY_AFTER: String(DEEP_AFTER_S),
    BERTH_SWAP_MB: String(swapMb),
    BERTH_DEEP_STANDBY_DAEMON: process.env.BERTH_DEEP_STANDBY_DAEMON ?? 'swap',
    BERTH_WARM_POOL: '0',
    BERTH_QUOTA_MEMORY_MB: '100000000',
    BERTH_QUOTA_SANDBOXES: '100000',
  });
  const swapFile = join(berth.dataDir, 'swap', 'berth.swap');
  const { createLinuxDriver } = await import('../../packages/server/dist/runtime/index.js');
  const driver = await createLinuxDriver({ dataDir: berth.dataDir, netPoolSize: 0 });
  const exec = (name, command) =>
    berth.call('POST', `${berth.sandboxPath(name)}/process`, { command, waitForCompletion: true });
  try {
    const before = { rss: rssMb(berth.pid), avail: availableMb() };
    const started = performance.now();
    const names = [];
    let awakeCharged = 0;
    const chargedAwake = new Map();
    let stop = `BENCH_DEEP_N=${MAX_N} reached`;
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < MAX_N; i = next++) {
          if ((performance.now() - started) / 1000 > BUDGET_S) {
            stop = `the ${BUDGET_S} s creation budget ran out (BENCH_DEEP_SECONDS)`;
            return;
          }
          const name = `deep-${i}`;
          await berth.create(name, { runtime: { memory: DENSE_MEMORY_MB } });
          await berth.call('POST', `${berth.sandboxPath(name)}/process`, { command: HOLDER, name: 'holder' });
          for (let t = 0; t < 200; t++) {
            const r = await exec(name, 'cat /workspace/expect 2>/dev/null');
            if (r.stdout.trim().length === 64) break;
            await sleep(50);
          }
          const charged = ((await driver.stats(`default.${name}`))?.memoryBytes ?? 0) / 1024 / 1024;
          awakeCharged += charged;
          chargedAwake.set(name, charged);
          names.push(name);
        }
      }),
    );
    const n = names.length;
    const createS = (performance.now() - started) / 1000;
    // Every sandbox frozen, then deep: its holder's 20 MB out of its cgroup (with BERTH_DEEP_STANDBY_DAEMON=resident
    // the API daemon stays; else the cgroup is down to its kernel memory).
    let deep = 0;
    for (let t = 0; t < 600; t++) {
      deep = 0;
      for (const name of names) {
        const i = await driver.inspect(`default.${name}`);
        const s = await driver.stats(`default.${name}`);
        if (i?.state === 'frozen' && s && s.memoryBytes / 1024 / 1024 < chargedAwake.get(name) - HOLDER_MB)
          deep++;
      }
      if (deep === n) break;
      await sleep(1000);
    }
    await sleep(2000);
    let cgroupLeft = 0;
    for (const name of names)
      cgroupLeft += ((await driver.stats(`default.${name}`))?.memoryBytes ?? 0) / 1024 / 1024;
    const after = { rss: rssMb(berth.pid), avail: availableMb() };
    const swaps = readFileSync('/proc/swaps', 'utf8');

    // The awake baseline: the same request to a sandbox that is running.
    await berth.create('awake', { runtime: { memory: DENSE_MEMORY_MB } });
    const awake = [];
    for (let i = 0; i < 50; i++) awake.push(await timed(() => exec('awake', 'true')));
    // Wake a random sample with the same request, then check its memory and counter.
    const sample = [...names].sort(() => Math.random() - 0.5).slice(0, Math.min(SAMPLE, n));
    const wake = [];
    let exact = 0;
    const bad = [];
    for (const name of sample) {
      wake.push(await timed(() => exec(name, 'true')));
      await exec(name, 'kill -USR1 $(cat /workspace/pid)');
      let check = '';
      for (let t = 0; t < 100 && !check; t++) {
        check = (await exec(name, 'cat /workspace/check 2>/dev/null')).stdout.trim();
        if (!check) await sleep(20);
      }
      const expect = (await exec(name, 'cat /workspace/expect')).stdout.trim();
      const [sha, counter] = check.split(' ');
      if (sha === expect && Number(counter) > 0) exact++;
      else bad.push(name);
    }

    header(
      `sandboxes: deep standby (${n} sandboxes holding ${HOLDER_MB} MB each, ${deep} deep; created in ${createS.toFixed(0)} s, stopped: ${stop}; API daemon: ${process.env.BERTH_DEEP_STANDBY_DAEMON ?? 'swap'})`,
    );
    const perSandbox = (before.avail - after.avail) / n;
    row(
      'host memory per sandbox, deep (baseline: its cgroup awake)',
      perSandbox,
      awakeCharged / n,
      'MiB',
      '<= 1 MiB',
    );
    row('  its cgroup, deep (kernel memory; baseline: awake)', cgroupLeft / n, awakeCharged / n, 'MiB');
    row("  Berth server RSS per sandbox (baseline: host's)", (after.rss - before.rss) / n, perSandbox, 'MiB');
    row(
      'wake p50: first exec on a deep sandbox (baseline: awake)',
      percentile(wake, 50),
      percentile(awake, 50),
      'ms',
      'p50 <= 50 ms',
    );
    row('wake p99', percentile(wake, 99), percentile(awake, 99), 'ms');
    row(`byte-exact after wake (of ${sample.length} sampled)`, exact, sample.length, 'boxes');
    if (bad.length) console.log(`not byte-exact: ${bad.join(', ')}`);
    console.log(swaps.trim());
    await berth.removeAll();
    return { perSandboxMb: perSandbox, wakeP50: percentile(wake, 50), exact: exact === sample.length };
  } finally {
    await driver.close();
    await berth.removeAll().catch(() => undefined);
    try {
      execFileSync('swapoff', [swapFile], { stdio: 'ignore' });
    } catch {}
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchDeepStandby();
