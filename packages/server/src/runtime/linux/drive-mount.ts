// Live drive mounts: a drive (or a directory of it) attached to, or detached from, a running sandbox's mount
// namespace by the compiled helper (drive-helper.ts). The helper acts on a process inside the sandbox's
// namespaces: any task of its cgroup but bubblewrap's outer one, which stays in the host's.
import { readlinkSync } from 'node:fs';
import { driveHelper } from './drive-helper.js';
import { CommandError, run } from './exec.js';

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

/** The helper's own message (what step failed, and why), never its command line: that names host paths. */
async function helped(args: string[]): Promise<void> {
  const helper = await driveHelper();
  try {
    await run(helper, args);
  } catch (e) {
    if (e instanceof CommandError)
      throw new Error(e.stderr.trim() || `the drive helper failed (${e.exitCode})`);
    throw e;
  }
}

/**
 * Mounts into the sandbox of `pid` in one run of the helper. `fresh`: the sandbox is being created and nothing of
 * the user's runs in it yet, so a mount point may be made in its read-only root (a volume at /data); a live drive
 * mount into a running sandbox never may.
 */
export async function attachMounts(pid: number, uid: number, mounts: DriveMountRequest[], fresh = false) {
  if (!mounts.length) return;
  const args = ['mount', String(pid), String(uid), fresh ? '1' : '0'];
  for (const m of mounts) args.push(m.mountPath, m.driveRoot, m.subPath, m.readOnly ? '1' : '0');
  await helped(args);
}

export const attachDrive = (pid: number, uid: number, m: DriveMountRequest) => attachMounts(pid, uid, [m]);

export async function detachDrive(pid: number, mountPath: string) {
  await helped(['umount', String(pid), mountPath]);
}
