// Volumes on disk: one sparse file per volume, formatted ext4 and loop-mounted by the server (root), so the size
// cap is the file system's own (a write past it fails with ENOSPC inside the sandbox, never after the fact).
// Layout, scoped by workspace so a delete can only reach its own tenant's files:
//   <dataDir>/volumes/<workspace>/<name>/disk.img   the image (created as disk.img.tmp, renamed once formatted)
//                                       /mnt        where it is mounted (nosuid, nodev)
// Every step is idempotent and re-reads the kernel's mount table, so a crash (kill -9) at any point leaves
// nothing a later call trips over: a half-made image is a .tmp file that the next ensure removes, a mount left by
// a dead server is adopted as it is, and `mount -o loop` sets autoclear, so unmounting frees the loop device.
import { chmodSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as tar from 'tar';
import { type SandboxSpec, VolumeMissingError, type VolumeRef } from '../driver.js';
import { mountsUnder } from './disk.js';
import { run } from './exec.js';
import { unexposeUnder } from './host.js';

export const VOLUMES_SUBDIR = 'volumes';
/** Drives (decision 031) are images like volumes, in their own tree so a drive and a volume may share a name. */
export const DRIVES_SUBDIR = 'drives';
/** Names are DNS labels (kinds/common.ts); this is checked again here because they become paths. */
const PLAIN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export function volumeDir(dataDir: string, ref: VolumeRef): string {
  if (!PLAIN.test(ref.workspace) || !PLAIN.test(ref.name))
    throw new Error(`invalid volume reference ${JSON.stringify(ref)}`);
  return join(dataDir, ref.drive ? DRIVES_SUBDIR : VOLUMES_SUBDIR, ref.workspace, ref.name);
}

/** Every volume with a directory under the data dir (names that are not labels are not Berth's: left out). */
export function volumesOnDisk(dataDir: string): VolumeRef[] {
  const root = join(dataDir, VOLUMES_SUBDIR);
  const out: VolumeRef[] = [];
  const dirs = (p: string) => {
    try {
      return readdirSync(p, { withFileTypes: true }).filter((e) => e.isDirectory() && PLAIN.test(e.name));
    } catch {
      return [];
    }
  };
  for (const ws of dirs(root))
    for (const v of dirs(join(root, ws.name))) out.push({ workspace: ws.name, name: v.name });
  return out;
}

export const volumeMountPoint = (dataDir: string, ref: VolumeRef) => join(volumeDir(dataDir, ref), 'mnt');

const isMounted = (mp: string) => mountsUnder(mp).includes(mp);

/**
 * Makes the volume exist and be mounted; returns the mount point. A new volume is `sizeMb` big and, when `seed` (a
 * tar or tar.gz file) is given, filled from it before anything can see it. An existing image is only mounted
 * (after a reboot) or left as it is: size and seed apply at creation only.
 */
export async function ensureVolume(
  dataDir: string,
  ref: VolumeRef,
  sizeMb: number,
  seed?: string,
  create = true,
): Promise<string> {
  const dir = volumeDir(dataDir, ref);
  const img = join(dir, 'disk.img');
  const mnt = join(dir, 'mnt');
  if (isMounted(mnt)) return mnt;
  if (!create && !existsSync(img)) throw new VolumeMissingError(ref);
  mkdirSync(mnt, { recursive: true, mode: 0o700 });
  if (!existsSync(img)) {
    const tmp = `${img}.tmp`;
    // A crash while seeding can leave the half-made image mounted aside: unmount before throwing it away.
    for (const mp of mountsUnder(join(dir, 'seed'))) await run('umount', ['-l', mp]);
    rmSync(join(dir, 'seed'), { recursive: true, force: true });
    rmSync(tmp, { force: true });
    await run('truncate', ['-s', `${Math.floor(sizeMb)}M`, tmp]);
    // No reserved blocks: the whole cap is the user's. root_owner: the sandbox's uid takes it at attach.
    await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'root_owner=0:0', tmp]);
    if (seed) await seedImage(tmp, dir, seed);
    renameSync(tmp, img); // from here on the volume exists; before, a crash leaves only the .tmp
  }
  await run('mount', ['-o', 'loop,nosuid,nodev', img, mnt]);
  await directIo(img);
  chmodSync(mnt, 0o755);
  return mnt;
}

/**
 * The loop device reads and writes its image with direct I/O: without it every block is cached twice (the
 * volume's page cache and the image file's), and a cold sequential read right after a write ran at half the host
 * disk's speed (bench/sandboxes/volumes.mjs: 0.47 of the host; with direct I/O, on par). Best effort: a backing
 * file system without O_DIRECT keeps buffered I/O, which is only slower.
 */
async function directIo(img: string): Promise<void> {
  const dev = (await run('losetup', ['-j', img])).split(':')[0];
  if (dev) await run('losetup', ['--direct-io=on', dev]).catch(() => undefined);
}

/** Extracts a template archive into a fresh image (mounted aside), refusing any entry that would leave it. */
async function seedImage(img: string, dir: string, seed: string): Promise<void> {
  const at = join(dir, 'seed');
  rmSync(at, { recursive: true, force: true });
  mkdirSync(at, { mode: 0o700 });
  await run('mount', ['-o', 'loop,nosuid,nodev', img, at]);
  try {
    await extractArchive(seed, at);
  } finally {
    await run('umount', [at]);
    rmSync(at, { recursive: true, force: true });
  }
}

/**
 * Unpacks a tar or tar.gz into `dest`. Entries with `..` or absolute paths are refused outright (strict), links
 * may not point out, device and fifo entries are skipped, and owners are not taken from the archive (files
 * belong to whoever attaches the volume). A full volume fails the extraction with ENOSPC.
 */
export async function extractArchive(file: string, dest: string): Promise<void> {
  await tar.x({
    file,
    cwd: dest,
    strict: true,
    preservePaths: false,
    preserveOwner: false,
    noMtime: false,
    filter: (_path, entry) => {
      const type = 'type' in entry ? entry.type : 'File';
      return ['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link'].includes(type);
    },
  });
}

/** Unmounts (freeing the loop device) and deletes the image; idempotent. */
export async function removeVolume(dataDir: string, ref: VolumeRef): Promise<void> {
  const dir = volumeDir(dataDir, ref);
  // A bind that made the mount point reachable by bwrap (host.ts exposeDir; volumes were bwrap binds before they
  // were mounted by the helper) holds the file system too: without its unmount the loop device would stay attached.
  await unexposeUnder(dataDir, dir);
  for (const mp of mountsUnder(dir)) await run('umount', [mp]).catch(() => run('umount', ['-l', mp]));
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Files of a volume are stored as uid and gid 0 on disk: every sandbox mounts it id-mapped (drive-helper.ts), so
 * they show as the sandbox's own user inside, whichever sandbox wrote them, and keep their owners and modes across
 * sandboxes. A volume written before that (re-owned to each holder's host uid at attach) is re-owned to 0 once;
 * afterwards this is a stat.
 */
export async function storeAsRoot(mnt: string): Promise<void> {
  const st = statSync(mnt);
  if (st.uid !== 0 || st.gid !== 0) await run('chown', ['-R', '-h', '0:0', mnt]);
}

/** Volume directories are never created by the runtime: a missing one fails the start rather than run without. */
export function checkVolumeDirs(spec: Pick<SandboxSpec, 'volumes'>): void {
  for (const v of spec.volumes)
    if (!statSync(v.hostPath, { throwIfNoEntry: false })?.isDirectory())
      throw new Error(`volume directory ${v.hostPath} is missing: the volume is not mounted`);
}
