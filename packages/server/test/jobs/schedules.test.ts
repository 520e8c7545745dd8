// A schedule trigger (cron in UTC, here every 2 seconds) starts executions with the trigger's tasks within a second
// of each firing time; the execution id carries the firing time it was started for.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { api, deployJob, waitExecution } from './support.js';

describe('job schedules', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-jobs-cron-'));
    await deployJob(s, join(work, 'job'), 'cron-job', { memory: 256, maxConcurrentTasks: 2 });
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('fires within a second of its time with the trigger tasks', async () => {
    const cur = await api(s, '/jobs/cron-job');
    const bad = await api(s, '/jobs/cron-job', {
      method: 'PUT',
      json: {
        metadata: { name: 'cron-job' },
        spec: {
          ...cur.body.spec,
          triggers: [{ type: 'schedule', configuration: { schedule: 'every minute' } }],
        },
      },
    });
    assert.equal(bad.status, 422, 'an expression that does not parse is refused');
    const put = await api(s, '/jobs/cron-job', {
      method: 'PUT',
      json: {
        metadata: { name: 'cron-job' },
        spec: {
          ...cur.body.spec,
          triggers: [
            {
              id: 'tick',
              type: 'schedule',
              configuration: { schedule: '*/2 * * * * *', tasks: [{ name: 'cron' }] },
            },
          ],
        },
      },
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    let list: any[] = [];
    for (let i = 0; i < 200 && list.length < 2; i++) {
      list = (await api(s, '/jobs/cron-job/executions')).body;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(list.length >= 2, `two firings in 20 s, saw ${list.length}`);
    for (const e of list) {
      const id: string = e.metadata.id;
      assert.match(id, /^s-tick-/);
      const due = Number.parseInt(id.slice('s-tick-'.length), 36);
      assert.equal(due % 2000, 0, 'a firing on an even second');
      const lag = Date.parse(e.metadata.createdAt) - due;
      assert.ok(lag >= 0 && lag < 1000, `started ${lag} ms after its time`);
    }
    const done = await waitExecution(s, 'cron-job', list[0].metadata.id);
    assert.equal(done.status, 'succeeded');
    const log = await api(s, `/jobs/cron-job/executions/${list[0].metadata.id}/tasks/0/logs`);
    assert.match(log.body, /hello, cron/);
  });
});
