// A task's log kept in the store (job-task-logs.ts) over a real SQLite store: stored with an attempt's number and its
// end only past TASK_LOG_KEPT_BYTES; written back to a server's file only when the store has later attempts than the
// file (a missing file, or one from before a failover), never over a file that is as new.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SqliteStore } from '../../store/sqlite.js';
import { lastAttempt, restoreLog, storeLogOp, TASK_LOG_KEPT_BYTES, taskLogKey } from './job-task-logs.js';

describe("a job task's log kept in the store", () => {
  let dir: string;
  let store: SqliteStore;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'berth-task-logs-'));
    store = new SqliteStore(join(dir, 'berth.db'));
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is stored with each attempt and written back where the file lacks later attempts', async () => {
    const key = taskLogKey('ws-a', 'job', 'x1', 0);
    const leader = join(dir, 'leader.log');
    writeFileSync(leader, '--- attempt 1 ---\nfirst\n');
    await store.write([await storeLogOp(store, key, leader, 1)]);
    writeFileSync(leader, '--- attempt 1 ---\nfirst\n--- attempt 2 ---\nsecond\n');
    await store.write([await storeLogOp(store, key, leader, 2)]);

    // A new leader with no file, and one holding only attempt 1 (it led before): both get attempt 2.
    const none = join(dir, 'new/leader.log');
    await restoreLog(store, key, none);
    assert.equal(readFileSync(none, 'utf8'), readFileSync(leader, 'utf8'));
    const older = join(dir, 'older.log');
    writeFileSync(older, '--- attempt 1 ---\nfirst\n');
    await restoreLog(store, key, older);
    assert.equal(lastAttempt(readFileSync(older, 'utf8')), 2);
    // A file as new as the store is left as it is; another task's key finds nothing.
    writeFileSync(older, '--- attempt 1 ---\nfirst\n--- attempt 2 ---\nsecond, and more\n');
    await restoreLog(store, key, older);
    assert.match(readFileSync(older, 'utf8'), /second, and more/);
    const other = join(dir, 'other.log');
    await restoreLog(store, taskLogKey('ws-b', 'job', 'x1', 0), other);
    assert.throws(() => readFileSync(other), /ENOENT/);
  });

  it('keeps only the end of a log past its bound, from the start of a line', async () => {
    const key = taskLogKey('ws-a', 'job', 'big', 0);
    const file = join(dir, 'big.log');
    const line = `${'x'.repeat(99)}\n`;
    writeFileSync(
      file,
      `--- attempt 1 ---\n${line.repeat(TASK_LOG_KEPT_BYTES / 100 + 1000)}--- attempt 2 ---\nlast\n`,
    );
    await store.write([await storeLogOp(store, key, file, 2)]);
    const text = (await store.get(key))?.body.text as string;
    assert.ok(Buffer.byteLength(text) <= TASK_LOG_KEPT_BYTES + 64, String(Buffer.byteLength(text)));
    assert.match(text, /^\[earlier output not kept\]\nx{99}\n/);
    assert.match(text, /--- attempt 2 ---\nlast\n$/);
  });
});
