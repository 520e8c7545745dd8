// bench/sandboxes volumes: inside a sandbox, on a volume (a loop-mounted ext4 image in the data dir), against the
// same commands run on the host in a directory of the same disk, in the same run: sequential write and read
// throughput (256 MB, flushed to disk; page cache dropped before each read) and small-file creates (1 KB each).
// Targets: >= 80% of the host's figures. Also the time a volume's attach adds to a sandbox create: <= 10 ms.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { header, row } from '../lib/report.mjs';
import { percentile, startSandboxBerth, timed } from './lib.mjs';

const MB = Number(process.env.BENCH_VOLUME_MB ?? 256);
const FILES = Number(process.env.BENCH_VOLUME_FILES ?? 2000);
const CREATES = Number(process.env.BENCH_VOLUME_CREATES ?? 10);
/** Between creates, for the warm pool to refill (linux-driver.ts REFILL_DELAY_MS plus a sandbox start). */
const PAUSE_MS = Number(process.env.BENCH_VOLUME_PAUSE_MS ?? 1500);

/** One shell script for both sides, printing `write_ms read_ms files_ms`; DROP is run (on the host) between. */
const script = (dir) => `
set -e; cd ${dir}; now() { date +%s%N; }
a=$(now); dd if=/dev/zero of=seq bs=1M count=${MB} conv=fdatasync status=none; b=$(now)
echo $(( (b-a)/1000000 ))`;
const readScript = (dir) => `
set -e; cd ${dir}; now() { date +%s%N; }
a=$(now); dd if=seq of=/dev/null bs=1M status=none; b=$(now); rm -f seq
echo $(( (b-a)/1000000 ))`;
const filesScript = (dir) => `
set -e; mkdir -p ${dir}/small; cd ${dir}/small; now() { date +%s%N; }
a=$(now); i=0; while [ $i -lt ${FILES} ]; do head -c 1024 /dev/zero > f$i; i=$((i+1)); done; sync; b=$(now)
cd ..; rm -rf small; echo $(( (b-a)/1000000 ))`;

const dropCaches = () => execFileSync('sh', ['-c', 'sync; echo 3 > /proc/sys/vm/drop_caches']);

export async function benchVolumes() {
  const berth = await startSandboxBerth({ BERTH_STANDBY_AFTER: '600' });
  const hostDir = mkdtempSync(join(berth.dataDir, 'host-'));
  try {
    await berth.call('POST', '/v0/volumes', { metadata: { name: 'bench' }, spec: { size: MB * 2 + 256 } });
    for (let i = 0; i < 200; i++) {
      const v = await berth.call('GET', '/v0/volumes/bench');
      if (v.status === 'DEPLOYED') break;
      if (v.status === 'FAILED') throw new Error(JSON.stringify(v.events));
      await new Promise((r) => setTimeout(r, 50));
    }
    const volumes = [{ name: 'bench', mountPath: '/data' }];
    await berth.create('vol-bench', { volumes });
    const path = `${berth.sandboxPath('vol-bench')}/process`;
    const inside = async (cmd) => {
      const p = await berth.call('POST', path, { command: cmd, waitForCompletion: true, timeout: 600 });
      if (p.exitCode !== 0) throw new Error(`bench command failed: ${JSON.stringify(p)}`);
      return Number(p.stdout.trim());
    };
    const onHost = (cmd) => Number(execFileSync('sh', ['-c', cmd], { encoding: 'utf8' }).trim());
    const w = await inside(script('/data'));
    dropCaches();
    const r = await inside(readScript('/data'));
    const f = await inside(filesScript('/data'));
    const hw = onHost(script(hostDir));
    dropCaches();
    const hr = onHost(readScript(hostDir));
    const hf = onHost(filesScript(hostDir));
    header(
      `sandboxes: volume I/O inside a sandbox vs the host's disk (${MB} MB sequential, ${FILES} small files)`,
    );
    const mbps = (ms) => (MB * 1000) / ms;
    row('volume sequential write (fdatasync)', mbps(w), mbps(hw), 'MB/s', '>= 80% (ratio >= 0.8)');
    row('volume sequential read (cold cache)', mbps(r), mbps(hr), 'MB/s', '>= 80% (ratio >= 0.8)');
    row(
      'volume small-file creates (1 KB)',
      (FILES * 1000) / f,
      (FILES * 1000) / hf,
      'files/s',
      '>= 80% (ratio >= 0.8)',
    );

    // Attach time: the same create with and without the volume, alternating, each sandbox deleted before the next.
    await berth.call('DELETE', '/v0/sandboxes/vol-bench');
    const waitDetached = async () => {
      for (let i = 0; i < 600; i++) {
        if (!(await berth.call('GET', '/v0/volumes/bench')).state?.attachedTo) return;
        await new Promise((r2) => setTimeout(r2, 20));
      }
    };
    await waitDetached();
    const withVol = [];
    const without = [];
    for (let i = 0; i < CREATES; i++) {
      // Alternating which goes first, each create deleted and followed by a pause: a create right after another
      // finds the warm pool refilling at once (linux-driver.ts refillSoon: a burst), and the second would then
      // measure that refill's CPU (two sandbox starts on this machine's cores), not its own work.
      const kinds = i % 2 ? ['with', 'without'] : ['without', 'with'];
      for (const kind of kinds) {
        const name = `${kind === 'with' ? 'wv' : 'nv'}-${i}`;
        const ms = await timed(() => berth.create(name, kind === 'with' ? { volumes } : {}));
        (kind === 'with' ? withVol : without).push(ms);
        await berth.call('DELETE', `/v0/sandboxes/${name}`);
        await waitDetached();
        await new Promise((r2) => setTimeout(r2, PAUSE_MS));
      }
    }
    header(`sandboxes: create with a volume vs without (${CREATES} each, alternating)`);
    row('create p50, with a volume', percentile(withVol, 50), percentile(without, 50), 'ms');
    row(
      'attach time added (p50 difference)',
      percentile(withVol, 50) - percentile(without, 50),
      0,
      'ms',
      '<= 10 ms',
    );
    await berth.removeAll();
    await waitDetached();
  } finally {
    // The image is loop-mounted in the data dir: deleting the volume unmounts it before the dir goes.
    await berth.call('DELETE', '/v0/volumes/bench').catch(() => undefined);
    for (let i = 0; i < 200; i++) {
      const v = await berth.call('GET', '/v0/volumes/bench').catch(() => undefined);
      if (!v || v.status === 'TERMINATED') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    rmSync(hostDir, { recursive: true, force: true });
    await berth.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchVolumes();
