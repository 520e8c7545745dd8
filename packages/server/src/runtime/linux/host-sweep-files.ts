// What the host sweep (host-sweep.ts, decision 062) removes beyond slots: volume and drive mounts and loop devices of
// deleted data dirs, exposures whose source is gone, and API sockets nothing listens on.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { mountsUnder } from './disk.js';
import { run } from './exec.js';
import { RUN_DIR, SOCKETS_DIR } from './host.js';
import { readMountInfo } from './mountinfo.js';

/** What these sweeps count (host-sweep.ts's report has these fields among its own). */
export interface FileSweepCounts {
  mounts: number;
  loopDevices: number;
  sockets: number;
}

/**
 * A data dir is gone when its `sandboxes` directory is (every driver makes it at start): deleted, or its deletion
 * stopped at a mount point still held (a volume's), which leaves the directories above it.
 */
export const dataDirGone = (dir: string) => !existsSync(join(dir, 'sandboxes'));

/**
 * Volume and drive mounts (`<data dir>/volumes|drives/<ws>/<name>/mnt`) of gone data dirs, the loop devices behind
 * them, and exposures (host.ts exposeDir) whose source directory no longer exists.
 */
export async function sweepDataDirMounts(report: FileSweepCounts): Promise<void> {
  for (const m of readMountInfo()) {
    const v = /^(\/.*)\/(volumes|drives)\/[^/]+\/[^/]+\/mnt$/.exec(m.mountPoint);
    if (!v || !dataDirGone(v[1])) continue;
    await run('umount', ['-l', m.mountPoint]).then(
      () => report.mounts++,
      () => undefined,
    );
  }
  for (const dev of existsSync('/sys/block') ? readdirSync('/sys/block') : []) {
    if (!dev.startsWith('loop')) continue;
    let backing: string;
    try {
      backing = readFileSync(`/sys/block/${dev}/loop/backing_file`, 'utf8')
        .trim()
        .replace(/ \(deleted\)$/, '');
    } catch {
      continue; // not attached
    }
    const v = /^(\/.*)\/(volumes|drives)\/[^/]+\/[^/]+\/disk\.img$/.exec(backing);
    if (!v || !dataDirGone(v[1])) continue;
    if (readdirSync(`/sys/block/${dev}/holders`).length) continue;
    if (readMountInfo().some((m) => m.mountPoint.startsWith(`${v[1]}/`))) continue;
    await run('losetup', ['-d', `/dev/${dev}`]).then(
      () => report.loopDevices++,
      () => undefined,
    );
  }
  // Per data dir (`expose/<key>/<hash>`), and flat (`expose/<hash>`) as servers made them before.
  const expose = join(RUN_DIR, 'expose');
  const parents = [expose];
  for (const n of existsSync(expose) ? readdirSync(expose) : [])
    if (!n.endsWith('.src') && existsSync(join(expose, `${n}.src`)) === false) parents.push(join(expose, n));
  for (const own of parents) {
    let names: string[];
    try {
      names = readdirSync(own);
    } catch {
      continue;
    }
    for (const f of names.filter((n) => n.endsWith('.src'))) {
      let src: string;
      try {
        src = readFileSync(join(own, f), 'utf8');
      } catch {
        continue;
      }
      if (existsSync(src)) continue;
      const target = join(own, f.slice(0, -'.src'.length));
      for (const mp of mountsUnder(target))
        await run('umount', ['-l', mp]).then(
          () => report.mounts++,
          () => undefined,
        );
      rmSync(target, { recursive: true, force: true });
      rmSync(join(own, f), { force: true });
    }
  }
}

/**
 * API sockets (`/run/berth/sock`) nothing listens on: a connection refused is the kernel's word that the daemon
 * behind it is gone (a frozen one's socket still accepts). A live server re-creates none of them: a sandbox's
 * socket is linked once, at its start.
 */
export async function sweepSockets(report: FileSweepCounts): Promise<void> {
  for (const n of existsSync(SOCKETS_DIR) ? readdirSync(SOCKETS_DIR) : []) {
    if (!n.endsWith('.sock')) continue;
    const path = join(SOCKETS_DIR, n);
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect(path);
      s.once('connect', () => {
        s.destroy();
        resolve(false);
      });
      s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
    });
    if (refused) {
      rmSync(path, { force: true });
      report.sockets++;
    }
  }
}
