// The retention of job executions (job-retention.ts, decision 098) over a real SQLite store and log directory: an
// execution ended longer ago than the retention goes with its tasks, its stored task logs and its log files; one
// ended since, one still running however old, and another workspace's recent one stay; 0 days keeps everything; a
// server's log directories of executions the store no longer has go at its start.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SqliteStore } from '../../store/sqlite.js';
import { EVERY_WORKSPACE, type WriteOp } from '../../store/store.js';
import { removeOldExecutions, removeOrphanLogs } from './job-retention.js';
import { EXECUTION_KIND, execKey, TASK_KIND, taskKey } from './job-store.js';
import { TASK_LOG_KIND, taskLogKey } from './job-task-logs.js';

const DAY = 24 * 3600_000;
const NOW = Date.parse('2026-11-27T12:00:00Z');

describe('job executions kept for the retention, then removed', () => {
  let dir: string;
  let logs: string;
  let store: SqliteStore;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'berth-job-retention-'));
    logs = join(dir, 'logs');
    store = new SqliteStore(join(dir, 'berth.db'));
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** An execution of job `nightly` with two tasks, their stored logs and log files, ended `endedDaysAgo` ago. */
  const execution = async (ws: string, id: string, status: string, endedDaysAgo: number) => {
    const at = new Date(NOW - endedDaysAgo * DAY).toISOString();
    const ops: WriteOp[] = [
      {
        op: 'create',
        key: execKey(ws, 'nightly', id),
        body: {
          id,
          job: 'nightly',
          status,
          completedAt: status === 'running' ? undefined : at,
          updatedAt: at,
        },
      },
    ];
    for (const i of [0, 1]) {
      ops.push({ op: 'create', key: taskKey(ws, 'nightly', id, i), body: { index: i, status } });
      ops.push({ op: 'create', key: taskLogKey(ws, 'nightly', id, i), body: { attempt: 1, text: 'x\n' } });
      mkdirSync(join(logs, ws, 'nightly', id), { recursive: true });
      writeFileSync(join(logs, ws, 'nightly', id, `${i}.log`), '--- attempt 1 ---\nx\n');
    }
    await store.write(ops);
  };
  const ids = async (kind: string) =>
    (await store.list({ workspace: EVERY_WORKSPACE, kind }))
      .map((o) => `${o.workspace}/${o.parent}/${o.name}`)
      .sort();

  it('removes what ended before the retention, with its tasks and logs, and nothing else', async () => {
    await execution('ws-a', 'old', 'succeeded', 40);
    await execution('ws-a', 'recent', 'failed', 3);
    await execution('ws-a', 'running', 'running', 45);
    await execution('ws-b', 'other', 'succeeded', 10);
    assert.equal(await removeOldExecutions({ store, logsDir: logs, retentionDays: 0, now: () => NOW }), 0);
    assert.equal((await ids(EXECUTION_KIND)).length, 4, '0 days keeps everything');
    assert.equal(await removeOldExecutions({ store, logsDir: logs, retentionDays: 30, now: () => NOW }), 1);
    assert.deepEqual(await ids(EXECUTION_KIND), [
      'ws-a/nightly/recent',
      'ws-a/nightly/running',
      'ws-b/nightly/other',
    ]);
    for (const kind of [TASK_KIND, TASK_LOG_KIND])
      assert.ok(!(await ids(kind)).some((k) => k.includes('/old/')), `${kind} of the old one gone`);
    assert.equal((await ids(TASK_KIND)).length, 6);
    assert.equal(existsSync(join(logs, 'ws-a', 'nightly', 'old')), false, 'its log files');
    assert.equal(existsSync(join(logs, 'ws-a', 'nightly', 'recent', '0.log')), true);
  });

  it("removes a server's log directories of executions the store no longer has", async () => {
    mkdirSync(join(logs, 'ws-a', 'nightly', 'gone-elsewhere'), { recursive: true });
    writeFileSync(join(logs, 'ws-a', 'nightly', 'gone-elsewhere', '0.log'), 'x\n');
    assert.equal(await removeOrphanLogs(store, logs), 1);
    assert.equal(existsSync(join(logs, 'ws-a', 'nightly', 'gone-elsewhere')), false);
    assert.equal(existsSync(join(logs, 'ws-b', 'nightly', 'other', '1.log')), true);
  });
});
