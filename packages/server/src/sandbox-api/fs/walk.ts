// Walks a directory tree for find, search and content search without ever following a symlink out of it, and
// without wandering into the kernel's pseudo-filesystems.
import type { Dirent } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { EntryType } from '../schema.js';

/** Directories skipped by search and content search unless the caller names its own list. */
export const DEFAULT_EXCLUDED_DIRS = [
  'node_modules',
  'vendor',
  '.git',
  'dist',
  'build',
  'target',
  '__pycache__',
  '.venv',
  '.next',
  'coverage',
];

/** Entries visited by one walk at most: a search of `/` answers with what it found instead of running forever. */
export const MAX_WALK_ENTRIES = 200_000;

/** Virtual filesystems: endless or huge, and nothing a search of files means. */
const PSEUDO_FS = new Set(['/proc', '/sys', '/dev']);

export interface WalkOptions {
  excludeDirs?: Iterable<string>;
  excludeHidden?: boolean;
}

export interface WalkEntry {
  abs: string;
  /** Relative to the walk's root. */
  rel: string;
  name: string;
  type: EntryType;
  /** A regular file (not a symlink, socket, device...). */
  regular: boolean;
}

export async function* walk(root: string, opts: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  const excluded = new Set(opts.excludeDirs ?? []);
  const stack = [root];
  let visited = 0;
  while (stack.length) {
    const dir = stack.pop()!;
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      continue; // unreadable directory: skip it, as find does
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (const e of entries) {
      if (++visited > MAX_WALK_ENTRIES) return;
      if (opts.excludeHidden && e.name.startsWith('.')) continue;
      const abs = join(dir, e.name);
      const isDir = e.isDirectory();
      if (isDir && (excluded.has(e.name) || PSEUDO_FS.has(abs))) continue;
      yield {
        abs,
        rel: relative(root, abs),
        name: e.name,
        type: isDir ? 'directory' : 'file',
        regular: e.isFile(),
      };
      if (isDir) subdirs.push(abs);
    }
    // Depth-first in name order: the stack pops the first subdirectory first.
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i]);
  }
}
