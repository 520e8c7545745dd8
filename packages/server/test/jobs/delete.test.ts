// Deleting a job while one of its executions runs: the execution is cancelled with the job, so no task process
// and no task sandbox outlives it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { inspectingDriver, type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { api, deployJob, taskProcesses } from './support.js';

const JOB = 'doomed';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('deleting a job', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-job-delete-'));
    await deployJob(s, join(work, 'job'), JOB, { memory: 256, maxConcurrentTasks: 3, timeout: 120 });
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('cancels its running execution: no task process or sandbox is left', async () => {
    const tasks = Array.from({ length: 6 }, () => ({ sleep: 60 }));
    const c = await api(s, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks } });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const id = c.body.executionId;
    for (let i = 0; i < 600 && taskProcesses(id).length === 0; i++) await sleep(50);
    assert.ok(taskProcesses(id).length > 0, 'some tasks were running');

    const d = await api(s, `/jobs/${JOB}`, { method: 'DELETE' });
    assert.equal(d.status, 200, JSON.stringify(d.body));
    // The tasks sleep for 60 s: they are gone well before that only if the deletion stopped them.
    let left: string[] = [];
    for (let i = 0; i < 300; i++) {
      const driver = await inspectingDriver(s.dataDir);
      left = (await driver.list()).filter((x) => x.id.startsWith('job-')).map((x) => x.id);
      await driver.close();
      if (!left.length && !taskProcesses(id).length) break;
      await sleep(100);
    }
    assert.deepEqual(taskProcesses(id), [], 'no task process outlives the job');
    assert.deepEqual(left, [], 'no task sandbox outlives the job');
  });
});
