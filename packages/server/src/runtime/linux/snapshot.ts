// A snapshot layer (decision 053): what a running sandbox wrote over its root, copied so that the copy is one instant
// of it. The writable layer is a tmpfs and the data dir another filesystem, so the copy is bytes (no reflink across
// them). To keep the sandbox's pause short whatever it wrote, the copy is done twice: first in full while the
// sandbox runs, then, with its cgroup frozen (no process can write), only what changed since the first began (by
// ctime) is copied again and what went is removed. The pause is that catch-up: a walk of the layer plus the bytes
// written meanwhile. Processes, their connections and requests keep going; a request arriving during the pause
// waits for the thaw (RUNTIME-FACTS.md).
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { join } from 'node:path';
import type { SandboxCgroup } from './cgroup.js';
import { copyChanges, copyEntries } from './changes.js';
import { upperDir } from './disk.js';

/** Taken off the start of the full copy: the kernel's ctime clock is coarse (a tick, 4-10 ms), so a margin makes sure. */
const CTIME_MARGIN_MS = 100;

/**
 * Copies the upper of each overlay of the writable layer `rwDir` to `dest/<overlay>`, the sandbox frozen only for the
 * catch-up (one already frozen, in standby, stays frozen). Resolves with the time it was paused.
 */
export async function captureLayer(
  cg: SandboxCgroup,
  rwDir: string,
  dest: string,
): Promise<{ pausedMs: number }> {
  const ovl = join(rwDir, 'ovl');
  const overlays = existsSync(ovl) ? readdirSync(ovl) : [];
  const since = BigInt(Date.now() - CTIME_MARGIN_MS) * 1_000_000n;
  await Promise.all(overlays.map((name) => copyChanges(rwDir, join(dest, name), name, true)));
  const wasFrozen = cg.isFrozen();
  const t0 = performance.now();
  if (!wasFrozen) await cg.freeze();
  try {
    for (const name of overlays)
      await catchUp(upperDir(rwDir, name), join(dest, name), since, `${dest}.${name}.list`);
  } finally {
    if (!wasFrozen) cg.thaw();
  }
  return { pausedMs: performance.now() - t0 };
}

const kind = (mode: number) => mode & 0o170000;

/**
 * Makes `dest` what `src` is now, given that `dest` was copied from it after `since` (ns) began. Regular files,
 * symlinks and the modes of directories the copy has are written here (no process to spawn while the sandbox waits);
 * new directories (which may carry overlayfs' opaque mark) and whiteouts go through tar first, as the full copy.
 */
async function catchUp(src: string, dest: string, since: bigint, listFile: string): Promise<void> {
  dropGone(src, dest, '');
  const viaTar: string[] = [];
  const files: { rel: string; mode: number; atime: Date; mtime: Date; link: boolean }[] = [];
  const walk = (rel: string) => {
    for (const e of readdirSync(join(src, rel))) {
      const r = rel ? `${rel}/${e}` : e;
      const st = lstatSync(join(src, r), { bigint: true });
      if (st.ctimeNs >= since) {
        const mode = Number(st.mode) & 0o7777;
        if (st.isDirectory()) {
          if (existsSync(join(dest, r))) chmodSync(join(dest, r), mode);
          else viaTar.push(r);
        } else if (st.isFile() || st.isSymbolicLink())
          files.push({
            rel: r,
            mode,
            atime: st.atime,
            mtime: st.mtime,
            link: st.isSymbolicLink(),
          });
        else {
          rmSync(join(dest, r), { force: true });
          viaTar.push(r);
        }
      }
      if (st.isDirectory()) walk(r);
    }
  };
  walk('');
  if (viaTar.length) await copyEntries(src, dest, viaTar, listFile);
  for (const f of files) {
    const to = join(dest, f.rel);
    rmSync(to, { force: true });
    if (f.link) symlinkSync(readlinkSync(join(src, f.rel)), to);
    else {
      copyFileSync(join(src, f.rel), to);
      chmodSync(to, f.mode);
      utimesSync(to, f.atime, f.mtime);
    }
  }
}

/** Removes from the copy what the upper no longer has, or has as another kind of file. */
function dropGone(src: string, dest: string, rel: string): void {
  for (const e of readdirSync(join(dest, rel))) {
    const r = rel ? `${rel}/${e}` : e;
    const d = lstatSync(join(dest, r));
    let s: ReturnType<typeof lstatSync> | undefined;
    try {
      s = lstatSync(join(src, r));
    } catch {
      s = undefined;
    }
    if (!s || kind(Number(s.mode)) !== kind(Number(d.mode)))
      rmSync(join(dest, r), { recursive: true, force: true });
    else if (d.isDirectory()) dropGone(src, dest, r);
  }
}
