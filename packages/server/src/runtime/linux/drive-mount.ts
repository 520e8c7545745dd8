// Live drive mounts: a drive (or a directory of it) attached to, or detached from, a running sandbox's mount
// namespace by the compiled helper (drive-helper.ts). The helper acts on a process inside the sandbox's
// namespaces: any task of its cgroup but bubblewrap's outer one, which stays in the host's.
import { readlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { DriveMount, VolumeRef } from '../driver.js';
import { driveHelper } from './drive-helper.js';
import { CommandError, run } from './exec.js';
import { readMountInfo } from './mountinfo.js';
import { DRIVES_SUBDIR } from './volumes.js';

export interface DriveMountRequest {
  /** The drive's mount point on the host. */
  driveRoot: string;
  /** Directory under it, relative ('' for all of it); resolved beneath the root by the helper. */
  subPath: string;
  /** Absolute path inside the sandbox. */
  mountPath: string;
  readOnly: boolean;
}

const nsOf = (pid: number | 'self') => {
  try {
    return readlinkSync(`/proc/${pid}/ns/mnt`);
  } catch {
    return undefined;
  }
};

/** A task living in the sandbox's own mount namespace, among the cgroup's; undefined when none is. */
export function namespacePid(pids: number[]): number | undefined {
  const host = nsOf('self');
  return pids.find((p) => {
    const ns = nsOf(p);
    return ns !== undefined && ns !== host;
  });
}

/** Runs the mount helper; fails with its own message (what step failed, and why), never its command line: that
 *  names host paths. */
export async function helped(args: string[]): Promise<string> {
  const helper = await driveHelper();
  try {
    return await run(helper, args);
  } catch (e) {
    if (e instanceof CommandError)
      throw new Error(e.stderr.trim() || `the drive helper failed (${e.exitCode})`);
    throw e;
  }
}

/**
 * Mounts into the sandbox of `pid` in one run of the helper; returns each mount point with symlinks resolved, as
 * the sandbox's mount table names it.
 */
export async function attachMounts(pid: number, uid: number, mounts: DriveMountRequest[]): Promise<string[]> {
  if (!mounts.length) return [];
  const args = ['mount', String(pid), String(uid)];
  for (const m of mounts) args.push(m.mountPath, m.driveRoot, m.subPath, m.readOnly ? '1' : '0');
  const out = (await helped(args)).split('\n').filter(Boolean);
  return mounts.map((m, i) => out[i] ?? m.mountPath);
}

/** Returns the mount point with symlinks resolved. */
export const attachDrive = async (pid: number, uid: number, m: DriveMountRequest) =>
  (await attachMounts(pid, uid, [m]))[0];

export async function detachDrive(pid: number, mountPath: string) {
  await helped(['umount', String(pid), mountPath]);
}

/** The drives mounted on the host (`<dataDir>/drives/<workspace>/<name>/mnt`), by their file system's device. */
function hostDrives(dataDir: string): Map<string, VolumeRef> {
  const prefix = `${join(dataDir, DRIVES_SUBDIR)}/`;
  const out = new Map<string, VolumeRef>();
  for (const m of readMountInfo()) {
    if (!m.mountPoint.startsWith(prefix) || m.root !== '/') continue;
    const [workspace, name, mnt, ...rest] = m.mountPoint.slice(prefix.length).split('/');
    if (mnt === 'mnt' && rest.length === 0) out.set(m.dev, { workspace, name, drive: true });
  }
  return out;
}

/**
 * The drives mounted in the sandbox `pid` lives in, read back from the kernel: its mount table names each
 * mount's device (a drive's own loop device, the same as on the host), the drive directory it shows (its root)
 * and whether it is read-only. Nothing is kept aside, so the answer survives a server restart or kill -9 and
 * cannot disagree with what the sandbox sees. Deepest mount points first (the order to detach them in).
 */
export function drivesIn(dataDir: string, pid: number): DriveMount[] {
  const drives = hostDrives(dataDir);
  const out: DriveMount[] = [];
  for (const m of readMountInfo(pid)) {
    const drive = drives.get(m.dev);
    if (drive)
      out.push({ drive, drivePath: m.root, mountPath: m.mountPoint, readOnly: m.options.includes('ro') });
  }
  return out.sort((a, b) => b.mountPath.length - a.mountPath.length);
}
