// How many bytes an image root takes, in the one measure the per-workspace image quota counts
// (docs/decisions/037-image-names-per-workspace.md): every entry at least one 4 KiB block, a file its size rounded up
// to whole blocks, each inode once. A layer that plants a million empty files is charged for them, as the disk is.
import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ImageError } from './errors.js';

/** The allocation unit charged (ext4's and xfs's default block). */
export const BLOCK = 4096;

/** Bytes charged for one entry of `size` bytes (0 for a directory, a symlink or a hard link). */
export const entryBytes = (size: number) => BLOCK * Math.max(1, Math.ceil(size / BLOCK));

/** Bytes charged for a whole root (symlinks are not followed; hard-linked files count once). */
export function rootBytes(dir: string): number {
  const seen = new Set<number>();
  let total = 0;
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const st = lstatSync(join(d, name), { throwIfNoEntry: false });
      if (!st || seen.has(st.ino)) continue;
      seen.add(st.ino);
      total += entryBytes(st.isFile() ? st.size : 0);
      if (st.isDirectory()) walk(join(d, name));
    }
  };
  walk(dir);
  return total;
}

/**
 * What a root being built may still take: charged entry by entry before the entry is written, so an unpack stops
 * as soon as it would pass (a small layer that expands past a workspace's quota is refused before it fills the disk).
 */
export class Allowance {
  private used = 0;
  constructor(
    readonly bytes: number,
    readonly refusal: () => ImageError,
  ) {}

  take(n: number): void {
    this.used += n;
    if (this.used > this.bytes) throw this.refusal();
  }
}
