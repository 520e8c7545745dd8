// File and directory descriptions as the wire carries them (owner and group by name, octal permissions).
import { readFileSync, type Stats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { DirectoryJson, FileEntry, Subdirectory } from '../schema.js';

let users: Map<number, string> | undefined;
let groups: Map<number, string> | undefined;

/** uid/gid → name from /etc/passwd and /etc/group, read once (a sandbox's users do not change under it). */
function names(file: string): Map<number, string> {
  const map = new Map<number, string>();
  try {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const f = line.split(':');
      if (f.length >= 3 && /^\d+$/.test(f[2])) map.set(Number(f[2]), f[0]);
    }
  } catch {
    // no such file in a minimal image: numeric ids it is
  }
  return map;
}

export function ownerName(uid: number): string {
  users ??= names('/etc/passwd');
  return users.get(uid) ?? String(uid);
}

export function groupName(gid: number): string {
  groups ??= names('/etc/group');
  return groups.get(gid) ?? String(gid);
}

export function fileEntry(abs: string, st: Stats): FileEntry {
  return {
    name: basename(abs),
    path: abs,
    size: st.size,
    permissions: (st.mode & 0o7777).toString(8),
    owner: ownerName(st.uid),
    group: groupName(st.gid),
    lastModified: st.mtime.toISOString(),
  };
}

/** One level of `abs`; with `depth` > 0, subdirectories carry their own listing down to that depth. */
export async function listDirectory(
  abs: string,
  depth = 0,
  budget = { entries: Number.POSITIVE_INFINITY },
): Promise<DirectoryJson> {
  const dir: DirectoryJson = { name: basename(abs) || '/', path: abs, files: [], subdirectories: [] };
  for (const name of (await readdir(abs)).sort()) {
    if (budget.entries-- <= 0) break;
    const child = join(abs, name);
    // lstat: a symlink is listed as itself (as the service's daemon does), never followed out of the directory.
    const st = await lstat(child).catch(() => undefined);
    if (!st) continue;
    if (st.isDirectory()) {
      const sub: Subdirectory = { name, path: child };
      if (depth > 0) {
        const inner = await listDirectory(child, depth - 1, budget).catch(() => undefined);
        if (inner) {
          sub.files = inner.files;
          sub.subdirectories = inner.subdirectories;
        }
      }
      dir.subdirectories.push(sub);
    } else {
      dir.files.push(fileEntry(child, st));
    }
  }
  return dir;
}
