// The writable layer: one size-capped tmpfs per sandbox, mounted on the host at `/run/berth/sbx/<name>`. It holds the
// upper directories of the overlays the sandbox's root is made of (`ovl/<name>/upper`, rootfs.ts, decision 051), so a
// write anywhere in the root lands here, and the sandbox's /run/berth. tmpfs because it costs a single mount (~1 ms,
// no pool needed) against ~50 ms for mkfs + loop mount of an ext4 image; its pages are charged to the memory cgroup of
// the process that writes them, so a sandbox's files count toward its memory limit (decision 005).
import { statfsSync, statSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { run } from './exec.js';
import { type MountEntry, readMountInfo, readMountInfoAsync } from './mountinfo.js';

/** Bound at /run/berth (the API socket and env file): inside the layer, so under the same cap. */
export const RUN_SUBDIR = 'run';

/** Mount points under `dir` (inclusive), deepest first, from this process's mount table. */
export function mountsUnder(dir: string): string[] {
  return under(readMountInfo(), dir);
}

/**
 * The same off the event loop, for a sandbox's start and teardown (decision 078). Nothing is mounted at or under a
 * directory that does not exist (a mount point is a directory of this mount namespace, and one with a mount on it
 * cannot be removed here), so a fresh slot's start costs one `lstat`, not a read of the whole table.
 */
export async function mountsUnderAsync(dir: string): Promise<string[]> {
  try {
    await lstat(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return under(await readMountInfoAsync('self', dir), dir);
}

const under = (table: MountEntry[], dir: string) =>
  table
    .map((m) => m.mountPoint)
    .filter((p) => p === dir || p.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);

/** Mounts the layer (root 0700, owned by the sandbox's uid) and creates its run directory. */
export async function mountWritableLayer(rwDir: string, sizeMb: number, uid: number): Promise<void> {
  // Always a fresh layer, filled before any sandbox process runs: the chowns below follow names,
  // and an old layer could hold symlinks a previous sandbox planted.
  await unmountLayer(rwDir);
  await mkdir(rwDir, { recursive: true, mode: 0o700 });
  await run('mount', [
    '-t',
    'tmpfs',
    '-o',
    `size=${Math.floor(sizeMb)}m,mode=0700,uid=${uid},gid=${uid},nosuid,nodev`,
    'berth-rw',
    rwDir,
  ]);
  const p = join(rwDir, RUN_SUBDIR);
  await mkdir(p);
  await chown(p, uid, uid);
  await chmod(p, 0o700);
}

/** Where the sandbox's writes over the overlay `name` of its root are (rootfs.ts RootOverlay). */
export const upperDir = (rwDir: string, name: string) => join(rwDir, 'ovl', name, 'upper');

/** The cap of a mounted layer in MB, as the kernel has it (tmpfs: its size in pages); undefined when not mounted. */
export function layerSizeMb(rwDir: string): number | undefined {
  try {
    // A directory that is no mount point would report the file system it sits on.
    if (statSync(rwDir).dev === statSync(dirname(rwDir)).dev) return undefined;
    const fs = statfsSync(rwDir);
    return (fs.blocks * fs.bsize) / (1024 * 1024);
  } catch {
    return undefined;
  }
}

/**
 * Gives a mounted layer (a warm sandbox assigned to a spec) the cap `sizeMb`; fails below current use. A layer that
 * has that cap already is left as it is: a remount is a `mount` process on the create's path (a fork of the server,
 * 5-15 ms on a loaded host), and the warm pools mount their layers at the size creates ask for (warm-pool.ts).
 */
export async function resizeWritableLayer(rwDir: string, sizeMb: number): Promise<void> {
  if (layerSizeMb(rwDir) === Math.floor(sizeMb)) return;
  await run('mount', ['-o', `remount,size=${Math.floor(sizeMb)}m`, rwDir]);
}

/** Unmounts everything at or under `dir` (lazily if still busy) and deletes the mount point. */
export async function unmountLayer(dir: string): Promise<void> {
  for (const mp of await mountsUnderAsync(dir)) {
    await run('umount', [mp]).catch(() => run('umount', ['-l', mp]));
  }
  // Through the thread pool: removing a directory a mount has just left can wait in the kernel (the profile of
  // decision 078 shows hundreds of ms under load).
  await rm(dir, { recursive: true, force: true });
}
