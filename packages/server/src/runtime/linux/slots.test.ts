// Slot claims under the slots' lock (needs root: /run/berth/slots is the host's). The lock is shared by every server
// of the host, so a server waiting for it must go on serving (decision 078), and a warm sandbox's state dir moves with
// its claim in one step under it.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { claimSlot, releaseSlot, SLOTS_LOCK, slotOwner, transferSlot } from './slots.js';

const T = { timeout: 30_000 };

/** Takes the slots' lock as another server would (waiting while one of them holds it). */
async function holdLock(): Promise<void> {
  for (;;) {
    try {
      mkdirSync(SLOTS_LOCK);
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      await sleep(1);
    }
  }
}

test("a server waiting for the slots' lock that another process holds goes on serving", T, async () => {
  const root = mkdtempSync(join(tmpdir(), 'berth-slots-'));
  const owner = join(root, 'owner');
  mkdirSync(owner);
  const slot = await claimSlot(owner);
  let locked = false;
  try {
    await holdLock();
    locked = true;
    let released = false;
    const release = Promise.resolve(releaseSlot(slot, owner)).then(() => {
      released = true;
    });
    // A timer of this process runs while the release waits: the wait does not hold the event loop.
    await sleep(20);
    assert.equal(released, false, 'the release waits for the lock');
    assert.equal(slotOwner(slot), owner, 'and has changed nothing yet');
    rmdirSync(SLOTS_LOCK);
    locked = false;
    await release;
    assert.equal(slotOwner(slot), undefined, 'released once the lock was free');
  } finally {
    if (locked) rmSync(SLOTS_LOCK, { recursive: true, force: true }); // gone if broken as a stale one
    await releaseSlot(slot, owner);
    rmSync(root, { recursive: true, force: true });
  }
});

test(
  "a warm sandbox's state dir moves with its slot's claim; a transfer from a non-holder moves nothing",
  T,
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'berth-slots-'));
    const warm = join(root, 'warm');
    const assigned = join(root, 'assigned');
    mkdirSync(warm);
    const slot = await claimSlot(warm);
    try {
      assert.equal(await transferSlot(slot, warm, assigned, { move: true }), true);
      assert.ok(!existsSync(warm) && existsSync(assigned), 'the directory moved');
      assert.equal(slotOwner(slot), assigned, 'the claim names it where it is');
      const other = join(root, 'other');
      mkdirSync(other);
      assert.equal(await transferSlot(slot, other, join(root, 'stolen'), { move: true }), false);
      assert.ok(existsSync(other) && !existsSync(join(root, 'stolen')), 'nothing moved');
      assert.equal(slotOwner(slot), assigned, 'the claim is unchanged');
    } finally {
      await releaseSlot(slot, warm);
      await releaseSlot(slot, assigned);
      rmSync(root, { recursive: true, force: true });
    }
  },
);
