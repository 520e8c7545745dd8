// The kernel's mount table of a process (`/proc/<pid>/mountinfo`, proc(5)): one parser for the host's own table
// and for a sandbox's, whose mount points read as the sandbox sees them (relative to its root).
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

export interface MountEntry {
  /** `major:minor` of the file system's device: the same for every mount of one file system. */
  dev: string;
  /** The directory of the file system that is the mount's root (`/sub` for a bind of its `sub`). */
  root: string;
  mountPoint: string;
  /** Per-mount options (`ro`, `nosuid`, `idmapped`, ...), not the file system's. */
  options: string[];
  fsType: string;
}

/** Mountinfo escapes space, tab, newline and backslash as octal. */
const unescapeOctal = (s: string) =>
  s.replace(/\\(\d{3})/g, (_, o) => String.fromCharCode(Number.parseInt(o, 8)));

export function parseMountInfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    const sep = f.indexOf('-', 6);
    if (f.length < 10 || sep < 0) continue;
    out.push({
      dev: f[2],
      root: unescapeOctal(f[3]),
      mountPoint: unescapeOctal(f[4]),
      options: f[5].split(','),
      fsType: f[sep + 1],
    });
  }
  return out;
}

/** The table of `pid` (this process by default); throws when the process is gone. */
export function readMountInfo(pid: number | 'self' = 'self'): MountEntry[] {
  return parseMountInfo(readFileSync(`/proc/${pid}/mountinfo`, 'utf8'));
}

/**
 * The same through the thread pool (a table of thousands of lines on a busy host is milliseconds to read). With
 * `naming`, only the lines that contain that path (escaped as the table writes it) are parsed: a teardown looks for
 * a few mounts among every sandbox's, and the parse runs on the event loop.
 */
export async function readMountInfoAsync(
  pid: number | 'self' = 'self',
  naming?: string,
): Promise<MountEntry[]> {
  const text = await readFile(`/proc/${pid}/mountinfo`, 'utf8');
  if (naming === undefined) return parseMountInfo(text);
  const needle = escapeOctal(naming);
  return parseMountInfo(
    text
      .split('\n')
      .filter((line) => line.includes(needle))
      .join('\n'),
  );
}

const escapeOctal = (s: string) =>
  s.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
