// A fresh slot's address in the shared nftables tables (needs root): whatever a previous holder left there (its server
// died without the teardown) is gone, and this server's private ranges are open, after one read-back and one
// transaction (network.ts resetAddressRules).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { run } from './exec.js';
import { createLinuxDriver } from './linux-driver.js';
import { slotName } from './net-pool.js';
import { resetAddressRules, slotNet } from './network.js';
import { claimSlot, releaseSlot } from './slots.js';
import { makeMiniDaemonCodeDir } from './test-support/mini-daemon.js';

const T = { timeout: 60_000 };
const list = (table: string, set: string) => run('nft', ['list', 'set', 'inet', table, set]);
const listMap = (set: string) => run('nft', ['list', 'map', 'inet', 'berth_egress', set]);

test(
  "a fresh slot's address loses what a dead holder left in the tables and gets this server's ranges",
  T,
  async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-slot-rules-'));
    // The driver sets the host's tables up; the slot is this test's own, so no other sandbox's address is touched.
    const driver = await createLinuxDriver({
      dataDir,
      codeDir: makeMiniDaemonCodeDir(dataDir),
      netPoolSize: 0,
    });
    const owner = mkdtempSync(join(dataDir, 'slot-'));
    const slot = await claimSlot(owner);
    const { address } = slotNet(slot, slotName(slot));
    // Bounded on both sides: 10.x.0.2 must not match 10.x.0.20, another sandbox's address (a run beside this one).
    const escaped = address.replaceAll('.', '\\.');
    const mine = new RegExp(`(^|[\\s{,])${escaped}[ ,}\\n]`);
    try {
      await run(
        'nft',
        ['-f', '-'],
        [
          `add element inet berth_egress policed { ${address} }`,
          `add element inet berth_egress owners { ${address} : drop }`,
          `add element inet berth_egress raw_allowed { ${address} . 192.168.0.0/16, ${address} . 10.1.2.3 }`,
          `add element inet berth_egress snat_to { ${address} : 192.0.2.7 }`,
          `add element inet berth_private allowed { ${address} . 172.16.0.0/12 }`,
          '',
        ].join('\n'),
      );
      assert.match(await list('berth_egress', 'policed'), mine, 'left as a dead holder leaves it');
      await resetAddressRules(address, ['10.9.0.0/16', '10.9.1.0/24']);
      assert.doesNotMatch(await list('berth_egress', 'policed'), mine);
      assert.doesNotMatch(await listMap('owners'), mine);
      assert.doesNotMatch(await list('berth_egress', 'raw_allowed'), mine);
      assert.doesNotMatch(await listMap('snat_to'), mine);
      const allowed = await list('berth_private', 'allowed');
      assert.match(allowed, new RegExp(`(^|[\\s{,])${escaped} \\. 10\\.9\\.0\\.0/16`));
      assert.doesNotMatch(allowed, /172\.16\.0\.0\/12/, "the previous holder's range is closed");
      // Again on a clean address: nothing to delete, the same ranges (idempotent, as a pool start after a restart).
      await resetAddressRules(address, ['10.9.0.0/16']);
      assert.equal(
        (await list('berth_private', 'allowed')).match(new RegExp(`(^|[\\s{,])${escaped} \\.`, 'g'))?.length,
        1,
      );
    } finally {
      await resetAddressRules(address, []).catch(() => undefined);
      await releaseSlot(slot, owner);
      await driver.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  },
);
