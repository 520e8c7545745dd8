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
  rmdirSync,
  statSync,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';

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
export function claimSlot(ownerDir: string): number {
  mkdirSync(SLOTS_DIR, { recursive: true, mode: 0o700 });
  for (let slot = 0; slot < MAX_SLOTS; slot++) {
    try {
      symlinkSync(ownerDir, slotPath(slot));
      return slot;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (isStale(slot) && reclaim(slot, ownerDir)) return slot;
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

/** Replaces a stale claim under a lock, re-checking staleness once the lock is held. */
function reclaim(slot: number, ownerDir: string): boolean {
  const lock = join(SLOTS_DIR, '.reclaim.lock');
  try {
    mkdirSync(lock);
  } catch {
    try {
      if (Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS) rmdirSync(lock);
    } catch {}
    return false;
  }
  try {
    if (!isStale(slot)) return false;
    unlinkSync(slotPath(slot));
    symlinkSync(ownerDir, slotPath(slot));
    return true;
  } catch {
    return false;
  } finally {
    rmdirSync(lock);
  }
}

/** Frees a slot if (and only if) `ownerDir` holds it. */
export function releaseSlot(slot: number, ownerDir: string): void {
  if (owner(slot) === ownerDir) {
    try {
      unlinkSync(slotPath(slot));
    } catch {}
  }
}

export function slotOwner(slot: number): string | undefined {
  return owner(slot);
}

/** Hands a slot from one owner to another in one atomic rename (a pooled network to its sandbox). */
export function transferSlot(slot: number, from: string, to: string): boolean {
  if (owner(slot) !== from) return false;
  const tmp = join(SLOTS_DIR, `.${slot}.${process.pid}.tmp`);
  symlinkSync(to, tmp);
  renameSync(tmp, slotPath(slot));
  return true;
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
