// The data of deleted volumes on a node of a cluster (decision 102): removed at a sweep when its object is gone,
// and as the deletion of a volume made on this node arrives; data whose object exists is kept, even when the object
// names another node.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FakeDriver } from '../../runtime/fake.js';
import { SqliteStore } from '../../store/sqlite.js';
import { followVolumeDeletions, sweepVolumes } from './volume-sweep.js';

const key = (workspace: string, name: string) => ({ kind: 'Volume', workspace, parent: '', name });
const body = (name: string, node?: string) => ({
  metadata: { name },
  spec: { size: 64 },
  status: 'DEPLOYED',
  ...(node ? { node } : {}),
});

test("a node removes the data of volumes whose objects are gone, and keeps every other volume's", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-vol-sweep-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const driver = new FakeDriver();
  try {
    for (const k of ['ws/gone', 'ws/kept', 'ws/elsewhere', 'ws/old', 'other/gone-too'])
      driver.volumes.set(k, { sizeMb: 64 });
    await store.write([
      { op: 'create', key: key('ws', 'kept'), body: body('kept', 'node-a') },
      { op: 'create', key: key('ws', 'elsewhere'), body: body('elsewhere', 'node-b') },
      { op: 'create', key: key('ws', 'old'), body: body('old') },
    ]);
    const removed = await sweepVolumes({ store, driver, self: 'node-a' });
    assert.deepEqual(removed.map((r) => `${r.workspace}/${r.name}`).sort(), ['other/gone-too', 'ws/gone']);
    assert.deepEqual([...driver.volumes.keys()].sort(), ['ws/elsewhere', 'ws/kept', 'ws/old']);

    // Followed: a deletion of a volume made here removes its data; one made on another node is not this disk's.
    const stop = followVolumeDeletions({ store, driver, self: 'node-a' });
    try {
      await store.write([{ op: 'delete', key: key('ws', 'kept') }]);
      await store.write([{ op: 'delete', key: key('ws', 'elsewhere') }]);
      for (let i = 0; i < 50 && driver.volumes.has('ws/kept'); i++)
        await new Promise((r) => setTimeout(r, 10));
      assert.equal(driver.volumes.has('ws/kept'), false, 'removed as its deletion arrived');
      assert.equal(driver.volumes.has('ws/elsewhere'), true, "another node's volume is left to its node");
    } finally {
      stop();
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
