// Host-wide slot numbers. A slot gives a sandbox its kernel-visible names (cgroup `sb<n>`, netns
// `berth-sb<n>`, veth `bh<n>`), its /30 and its host uid. Kernel names, addresses and uids are
// global to the machine while sandbox ids are only unique per data dir (two servers, parallel test
// runs), so slots are claimed in /run (cleared at boot, like every sandbox) rather than in a data dir.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import { mkdir, readdir, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const SLOTS_DIR = '/run/berth/slots';
/** 10.200.0.0/16 cut into /30s. */
export const MAX_SLOTS = 16384;
/** A reclaim lock older than this belongs to a process that died while holding it. */
const STALE_LOCK_MS = 10_000;

const slotPath = (slot: number) => join(SLOTS_DIR, String(slot));

/**
 * Claims the lowest free slot for `ownerDir` (which must already exist: a claim whose owner directory
 * is gone is stale and may be reclaimed). A claim is a symlink to the owner directory, created
 * atomically, so two claimers never share a slot.
 */
export async function claimSlot(ownerDir: string): Promise<number> {
  await mkdir(SLOTS_DIR, { recursive: true, mode: 0o700 });
  // The claims there were a moment ago: a slot among them is only tried as a stale one. A `symlink` onto an existing
  // name fails, but only after taking the directory's lock, which every server of the host contends for.
  const claimed = new Set((await readdir(SLOTS_DIR)).filter((n) => /^\d+$/.test(n)).map(Number));
  for (let slot = 0; slot < MAX_SLOTS; slot++) {
    if (!claimed.has(slot))
      try {
        symlinkSync(ownerDir, slotPath(slot));
        return slot;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
    if (isStale(slot) && (await reclaim(slot, ownerDir))) return slot;
  }
  throw new Error(`all ${MAX_SLOTS} sandbox slots are in use`);
}

function owner(slot: number): string | undefined {
  try {
    return readlinkSync(slotPath(slot));
  } catch {
    return undefined;
  }
}

function isStale(slot: number): boolean {
  const o = owner(slot);
  return o !== undefined && !existsSync(o);
}

/** Replaces a stale claim under the lock, re-checking staleness once the lock is held. */
async function reclaim(slot: number, ownerDir: string): Promise<boolean> {
  // Busy: the next slot, rather than wait behind whoever holds it.
  return (
    (await withLock(
      () => {
        if (!isStale(slot)) return false;
        unlinkSync(slotPath(slot));
        symlinkSync(ownerDir, slotPath(slot));
        return true;
      },
      { wait: false },
    )) ?? false
  );
}

/** The slots' lock (withLock), shared by every server of the host. */
export const SLOTS_LOCK = join(SLOTS_DIR, '.reclaim.lock');

/**
 * Runs `fn` holding the slots' lock (a directory: made atomically, gone with rmdir), under which every change to an
 * existing claim happens: a reclaim, a release, a transfer and the host sweep's take-over (host-sweep.ts). So a
 * claim is compared and replaced in one step: nobody releases it between a check and a replacement. Held for `fn`'s
 * few system calls (synchronous: nothing else of this process runs in between); one left by a process killed while
 * holding it is broken after STALE_LOCK_MS. Undefined when `wait` is false and the lock is busy. Taking, waiting for
 * and dropping the lock go through the thread pool: the lock is shared by every server of the host, its `rmdir`
 * waited hundreds of ms in the kernel under load, and the event loop serves other creates meanwhile (decision 078).
 */
async function withLock<T>(fn: () => T, opts: { wait: boolean } = { wait: true }): Promise<T | undefined> {
  await mkdir(SLOTS_DIR, { recursive: true, mode: 0o700 });
  for (;;) {
    try {
      await mkdir(SLOTS_LOCK);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      try {
        if (Date.now() - (await stat(SLOTS_LOCK)).mtimeMs > STALE_LOCK_MS) await rmdir(SLOTS_LOCK);
      } catch {}
      if (!opts.wait) return undefined;
      await sleep(1);
    }
  }
  try {
    return fn();
  } catch {
    return undefined;
  } finally {
    await rmdir(SLOTS_LOCK);
  }
}

/** Frees a slot if (and only if) `ownerDir` holds it. */
export async function releaseSlot(slot: number, ownerDir: string): Promise<void> {
  await withLock(() => {
    if (owner(slot) === ownerDir) unlinkSync(slotPath(slot));
  });
}

export function slotOwner(slot: number): string | undefined {
  return owner(slot);
}

/**
 * Hands a slot from one owner to another in one atomic rename (a pooled network to its sandbox). With `move`, the
 * owner directory `from` is renamed to `to` under the lock as well (a warm sandbox assigned): a claim whose owner
 * directory is missing is stale to `claimSlot`, so the claim must never name a directory that is not there.
 */
export async function transferSlot(
  slot: number,
  from: string,
  to: string,
  opts: { move?: boolean } = {},
): Promise<boolean> {
  return (
    (await withLock(() => {
      if (owner(slot) !== from) return false;
      const tmp = join(SLOTS_DIR, `.${slot}.${process.pid}.tmp`);
      symlinkSync(to, tmp);
      try {
        if (opts.move) renameSync(from, to);
      } catch (e) {
        unlinkSync(tmp);
        throw e;
      }
      renameSync(tmp, slotPath(slot));
      return true;
    })) ?? false
  );
}

/** Claims exactly `slot` for `ownerDir` when nobody holds it (a teardown whose claim is gone, the host sweep). */
export function claimFreeSlot(slot: number, ownerDir: string): boolean {
  mkdirSync(SLOTS_DIR, { recursive: true, mode: 0o700 });
  try {
    symlinkSync(ownerDir, slotPath(slot));
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return false;
  }
}

/** Every claimed slot with its owner directory. */
export function claimedSlots(): Array<{ slot: number; owner: string }> {
  if (!existsSync(SLOTS_DIR)) return [];
  const out: Array<{ slot: number; owner: string }> = [];
  for (const n of readdirSync(SLOTS_DIR)) {
    if (!/^\d+$/.test(n)) continue;
    const o = owner(Number(n));
    if (o !== undefined) out.push({ slot: Number(n), owner: o });
  }
  return out;
}
