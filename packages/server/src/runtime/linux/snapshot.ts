// A snapshot layer (decision 053): what a running sandbox wrote over its root, copied so that the copy is one instant
// of it. The writable layer is a tmpfs and the data dir another filesystem, so the copy is bytes (no reflink across
// them). To keep the sandbox's pause short whatever it wrote, the copy is done twice: first in full while the
// sandbox runs, then, with its cgroup frozen (no process can write), only the entries that changed since each was
// copied are copied again and what went is removed. The pause is that catch-up: a walk of the layer plus the bytes
// written meanwhile. Processes, their connections and requests keep going; a request arriving during the pause
// waits for the thaw (RUNTIME-FACTS.md), and so does a wake-up of a sandbox in standby (the `hold` below).
//
// Regular files and symbolic links are copied here, several at once off the event loop (copy_file_range or sendfile
// inside fs.copyFile, as `cp` does), which is what made the first version's tar pipe twice as slow as `cp`;
// directories (which may carry overlayfs' opaque mark, an extended attribute node cannot write) and whiteouts go
// through tar, one pipe for all of them (changes.ts).
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, rmSync, type BigIntStats } from 'node:fs';
import { copyFile, link, lutimes, readlink, rm, symlink, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import type { SandboxCgroup } from './cgroup.js';
import { copyEntries } from './changes.js';
import { upperDir } from './disk.js';

/**
 * A file whose ctime was this close to the moment it was looked at may have been written again within the same
 * tick of the kernel's coarse clock (4-10 ms) without its ctime moving: the catch-up copies it again.
 */
const CTIME_MARGIN_NS = 20_000_000n;
/** Files copied at once: the copies run on libuv's thread pool (4 threads by default). */
const PARALLEL_COPIES = 4;

/** What the full copy saw of an entry: the catch-up copies it again when any of it moved. */
interface Seen {
  ino: bigint;
  ctimeNs: bigint;
  /** The entry's ctime was within CTIME_MARGIN_NS of the look: a write in the same tick would not show. */
  fresh: boolean;
}

/**
 * Copies the upper of each overlay of the writable layer `rwDir` to `dest/<overlay>`, the sandbox frozen only for the
 * catch-up (one already frozen, in standby, stays frozen). `hold` is given the catch-up while it runs: the driver
 * makes a thaw (a request waking a sandbox in standby) wait for it. Resolves with the time it was paused.
 */
export async function captureLayer(
  cg: SandboxCgroup,
  rwDir: string,
  dest: string,
  hold: (catchUp: Promise<void>) => void = () => {},
): Promise<{ pausedMs: number }> {
  const ovl = join(rwDir, 'ovl');
  const overlays = existsSync(ovl) ? readdirSync(ovl) : [];
  const seen = new Map<string, Map<string, Seen>>();
  for (const name of overlays) {
    const s = new Map<string, Seen>();
    seen.set(name, s);
    await copyTree(upperDir(rwDir, name), join(dest, name), `${dest}.${name}.list`, s, true);
  }
  let release = () => {};
  hold(new Promise<void>((r) => (release = r)));
  const wasFrozen = cg.isFrozen();
  const t0 = performance.now();
  try {
    if (!wasFrozen) await cg.freeze();
    for (const name of overlays) {
      const src = upperDir(rwDir, name);
      const to = join(dest, name);
      dropGone(src, to, '');
      await copyTree(src, to, `${dest}.${name}.list`, seen.get(name) as Map<string, Seen>, false);
    }
  } finally {
    if (!wasFrozen) cg.thaw();
    release();
  }
  const pausedMs = performance.now() - t0;
  if (process.env.SNAP2_DEBUG) console.error('SNAP2 paused', pausedMs);
  return { pausedMs };
}

const kind = (mode: number) => mode & 0o170000;

/**
 * Copies into `dest` the entries of the overlay upper `src` that `seen` does not hold as they are now (all of them on
 * the first pass, `first`), recording what it copied. Directories new to `dest` and special files (whiteouts) go
 * through tar; a directory `dest` has gets its mode; regular files and links are copied here.
 */
async function copyTree(
  src: string,
  dest: string,
  listFile: string,
  seen: Map<string, Seen>,
  first: boolean,
): Promise<void> {
  if (first) mkdirSync(dest, { recursive: true, mode: 0o755 });
  const viaTar: string[] = [];
  const files: { rel: string; st: BigIntStats }[] = [];
  const dirs: { rel: string; st: BigIntStats }[] = [];
  const walk = (rel: string) => {
    let names: string[];
    try {
      names = readdirSync(join(src, rel));
    } catch (e) {
      if (first) return; // went while the sandbox runs: the catch-up sees it gone
      throw e;
    }
    for (const e of names) {
      const r = rel ? `${rel}/${e}` : e;
      const at = BigInt(Date.now()) * 1_000_000n;
      let st: BigIntStats;
      try {
        st = lstatSync(join(src, r), { bigint: true });
      } catch (err) {
        if (first) continue;
        throw err;
      }
      const was = seen.get(r);
      const changed = !was || was.fresh || was.ino !== st.ino || was.ctimeNs !== st.ctimeNs;
      if (changed) {
        seen.set(r, { ino: st.ino, ctimeNs: st.ctimeNs, fresh: st.ctimeNs >= at - CTIME_MARGIN_NS });
        if (st.isDirectory()) {
          dirs.push({ rel: r, st });
          if (was && was.ino !== st.ino) rmSync(join(dest, r), { recursive: true, force: true });
          if (!first && existsSync(join(dest, r))) chmodSync(join(dest, r), Number(st.mode) & 0o7777);
          else viaTar.push(r);
        } else if (st.isFile() || st.isSymbolicLink()) files.push({ rel: r, st });
        else {
          if (!first) rmSync(join(dest, r), { force: true });
          viaTar.push(r);
        }
      }
      if (st.isDirectory()) walk(r);
    }
  };
  walk('');
  if (viaTar.length) await copyEntries(src, dest, viaTar, listFile, first);
  const linked = new Map<bigint, Promise<string>>();
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const { rel, st } = files[next++];
      try {
        await copyOne(src, dest, rel, st, first, linked);
      } catch (e) {
        // A file removed or replaced while the sandbox runs is the catch-up's to settle.
        if (!first) throw e;
        seen.delete(rel);
      }
    }
  };
  await Promise.all(Array.from({ length: PARALLEL_COPIES }, worker));
  // The copies into a directory moved its times: they are set back, deepest first (as tar does).
  for (const { rel, st } of dirs.reverse())
    await utimes(join(dest, rel), Number(st.atimeNs) / 1e9, Number(st.mtimeNs) / 1e9).catch((e) => {
      if (!first) throw e;
    });
}

async function copyOne(
  src: string,
  dest: string,
  rel: string,
  st: BigIntStats,
  first: boolean,
  /** The first copy of each inode with several links, by inode: its twins are links to it once it is whole. */
  linked: Map<bigint, Promise<string>>,
): Promise<void> {
  const to = join(dest, rel);
  if (!first) await rm(to, { force: true });
  if (st.isSymbolicLink()) {
    await symlink(await readlink(join(src, rel)), to);
    await lutimes(to, Number(st.atimeNs) / 1e9, Number(st.mtimeNs) / 1e9);
    return;
  }
  // Hard links within the layer stay links (tar kept them so too); a twin whose first copy failed is copied.
  const twin = st.nlink > 1n ? linked.get(st.ino) : undefined;
  const copy = twin && (await twin.catch(() => undefined));
  if (copy) {
    await link(join(dest, copy), to);
    return;
  }
  const copied = (async () => {
    await copyFile(join(src, rel), to); // the mode comes along (libuv sets it on the copy)
    await utimes(to, Number(st.atimeNs) / 1e9, Number(st.mtimeNs) / 1e9);
    return rel;
  })();
  if (st.nlink > 1n && !twin) linked.set(st.ino, copied);
  await copied;
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
