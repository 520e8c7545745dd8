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
import {
  type BigIntStats,
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
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
/**
 * Whether the layer's filesystem gives a change made after a stat a ctime that stat did not see (multigrain
 * timestamps: tmpfs since Linux 6.13), so that an unchanged ctime proves an unchanged file and the margin above is
 * not needed: a file written a moment before the capture is then copied once. Probed once per process: on a coarse
 * clock, twenty writes each right after a stat leave the ctime unmoved at least once.
 */
let fineCtime: boolean | undefined;
function probeFineCtime(dir: string): boolean {
  if (fineCtime !== undefined) return fineCtime;
  const f = join(dir, `.ctime-probe-${process.pid}`);
  try {
    writeFileSync(f, '0');
    let moved = 0;
    for (let i = 0; i < 20; i++) {
      const before = lstatSync(f, { bigint: true }).ctimeNs;
      writeFileSync(f, String(i));
      if (lstatSync(f, { bigint: true }).ctimeNs !== before) moved++;
    }
    fineCtime = moved === 20;
  } catch {
    return false; // a full layer, say: the margin for this capture, a probe again for the next
  } finally {
    rmSync(f, { force: true });
  }
  return fineCtime;
}

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
  const margin = probeFineCtime(rwDir) ? -1n : CTIME_MARGIN_NS;
  for (const name of overlays) {
    const s = new Map<string, Seen>();
    seen.set(name, s);
    await (
      await copyTree(upperDir(rwDir, name), join(dest, name), `${dest}.${name}.list`, s, true, margin)
    )();
  }
  let release = () => {};
  hold(new Promise<void>((r) => (release = r)));
  const wasFrozen = cg.isFrozen();
  const t0 = performance.now();
  const finish: (() => Promise<void>)[] = [];
  try {
    if (!wasFrozen) await cg.freeze();
    for (const name of overlays) {
      const src = upperDir(rwDir, name);
      const to = join(dest, name);
      dropGone(src, to, '');
      finish.push(
        await copyTree(src, to, `${dest}.${name}.list`, seen.get(name) as Map<string, Seen>, false, margin),
      );
    }
  } finally {
    if (!wasFrozen) cg.thaw();
    release();
  }
  const pausedMs = performance.now() - t0;
  for (const f of finish) await f();
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
  /** CTIME_MARGIN_NS, or below 0 on a filesystem whose ctime always moves after a stat (probeFineCtime). */
  margin: bigint,
): Promise<() => Promise<void>> {
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
        seen.set(r, { ino: st.ino, ctimeNs: st.ctimeNs, fresh: margin >= 0n && st.ctimeNs >= at - margin });
        if (st.isDirectory()) {
          dirs.push({ rel: r, st });
          if (was && was.ino !== st.ino) rmSync(join(dest, r), { recursive: true, force: true });
          if (first || !existsSync(join(dest, r))) viaTar.push(r);
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
  // The copies into a directory moved its times: they are set back, deepest first (as tar does), with the modes of
  // those the catch-up found changed. Left to the caller, who runs it after the thaw: what the frozen walk read is
  // all it needs, so the pause holds only the copies that must be of that instant.
  return async () => {
    for (const { rel, st } of dirs.reverse()) {
      const to = join(dest, rel);
      try {
        if (!first) chmodSync(to, Number(st.mode) & 0o7777);
        await utimes(to, Number(st.atimeNs) / 1e9, Number(st.mtimeNs) / 1e9);
      } catch (e) {
        if (!first) throw e;
      }
    }
  };
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
