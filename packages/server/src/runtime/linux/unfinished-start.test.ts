// A server killed between launching a sandbox and linking its daemon's socket (create.ts waitForSocket) leaves a
// live sandbox no request can reach. Seen once under chaos as a sandbox DEPLOYED and answering 502: the restarted
// server adopted it as it was. The state such a kill leaves is made here exactly (the record says the socket is
// pending, the link is absent), and a new driver must replace the sandbox rather than adopt it. A server killed while
// it removed a sandbox (its record already deleted with the directory's files) or before it wrote a new one's record
// leaves a directory no driver lists: a new driver removes it, with its processes, network and slot.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { smallSandboxSpec } from '../../test-support/sandbox-spec.js';
import { createLinuxDriver, type LinuxDriver } from './linux-driver.js';
import { slotNet } from './network.js';
import { slotOwner } from './slots.js';
import { isProcessAlive, readRecord, stateFile, writeRecord } from './state.js';
import { callSocket, makeMiniDaemonCodeDir } from './test-support/mini-daemon.js';

const T = { timeout: 90_000 };
let dataDir: string;
let codeDir: string;
let driver: LinuxDriver;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-rt-cut-'));
  codeDir = makeMiniDaemonCodeDir(dataDir);
  driver = await createLinuxDriver({ dataDir, codeDir });
});

after(async () => {
  for (const s of await driver.list()) await driver.remove(s.id);
  await driver.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test(
  'a sandbox launched by a server killed before it reached the daemon is replaced, not adopted unreachable',
  T,
  async () => {
    const first = await driver.ensure('cut', smallSandboxSpec());
    // What the kill leaves: the process runs, the record says the socket is pending, the server's link is absent.
    const dir = join(dataDir, 'sandboxes', 'cut');
    const rec = readRecord(dir)!;
    assert.equal(rec.socketPending, undefined, 'a finished start clears the flag');
    writeRecord(dir, { ...rec, socketPending: true });
    unlinkSync(first.socketPath);

    const fresh = await createLinuxDriver({ dataDir, codeDir });
    try {
      const found = await fresh.inspect('cut');
      assert.equal(found?.state, 'running');
      const again = await fresh.ensure('cut', smallSandboxSpec());
      assert.notEqual(again.pid, first.pid, 'replaced, not adopted');
      assert.equal(found?.unfinished, true, 'reported as a start that never finished');
      assert.equal(again.unfinished, undefined);
      assert.equal((await callSocket(again.socketPath, 'GET', '/health')).status, 200, 'its daemon answers');
      assert.throws(() => process.kill(first.pid, 0), 'the unreachable one is gone');
    } finally {
      await fresh.remove('cut');
      await fresh.close();
    }
  },
);

test(
  'a sandbox directory a killed server left without its record is removed at the next start, slot and all',
  T,
  async () => {
    await driver.ensure('halfgone', smallSandboxSpec());
    const dir = join(dataDir, 'sandboxes', 'halfgone');
    const rec = readRecord(dir)!;
    // A removal cut short: the record went with the directory's first files, the processes still run.
    unlinkSync(stateFile(dir));
    // A create cut short before its record: a directory, nothing claimed.
    const early = join(dataDir, 'sandboxes', 'early');
    mkdirSync(early);
    writeFileSync(join(early, 'state.json.tmp'), '{');
    assert.equal(
      (await driver.list()).some((s) => s.id === 'halfgone'),
      false,
      'no driver lists a directory without its record',
    );

    // The killed server's restart: no other driver serves the data dir (while one does, its creates may be under way,
    // and nothing is removed).
    const alongside = await createLinuxDriver({ dataDir, codeDir });
    await alongside.close();
    assert.equal(existsSync(dir), true, 'kept while the first driver serves the data dir');
    await driver.close();
    const fresh = await createLinuxDriver({ dataDir, codeDir });
    driver = fresh; // for the cleanup
    assert.equal(existsSync(dir), false, 'the directory is gone');
    assert.equal(existsSync(early), false, 'the unfinished create is gone');
    assert.equal(isProcessAlive(rec.pid, rec.pidStart), false, 'its processes are killed');
    assert.equal(existsSync(slotNet(rec.slot, rec.name).netnsPath), false, 'its network is deleted');
    assert.notEqual(slotOwner(rec.slot), dir, 'its slot is released');
    assert.equal(fresh.swept?.unrecorded?.unrecorded, 2);
    assert.deepEqual(fresh.swept?.unrecorded?.failures, []);
  },
);
