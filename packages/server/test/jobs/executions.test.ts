// Batch jobs end to end on real sandboxes: the job template deployed with `berth deploy`, executions started
// through the API; concurrency sampled from /proc, retries, and the per-task log with the task's own output (its
// input read through blStartJob). How executions end (timeout, cancel, callback) is in executions-end.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { berthIntoHead } from '../berth-cli.js';
import { api, berth, deployJob, taskProcesses, waitExecution } from './support.js';

const JOB = 'batch';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('job executions', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    // Callbacks to private addresses are refused unless opened: the test's receiver listens on loopback.
    s = await startSandboxServer({ BERTH_CALLBACK_ALLOW_CIDRS: '127.0.0.1/32' });
    work = mkdtempSync(join(tmpdir(), 'berth-jobs-'));
    await deployJob(s, join(work, 'job'), JOB, {
      memory: 256,
      maxConcurrentTasks: 5,
      maxRetries: 2,
      timeout: 120,
    });
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('runs 20 tasks never more than 5 at once (sampled from /proc) and all succeed', async () => {
    const tasks = Array.from({ length: 20 }, (_, i) => ({ name: `t${i}`, sleep: 0.3 }));
    const c = await api(s, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks } });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const id = c.body.executionId;
    let peak = 0;
    let done = false;
    const sampling = (async () => {
      while (!done) {
        peak = Math.max(peak, taskProcesses(id).length);
        await sleep(20);
      }
    })();
    const e = await waitExecution(s, JOB, id);
    done = true;
    await sampling;
    assert.equal(e.status, 'succeeded', JSON.stringify(e.stats));
    assert.equal(e.stats.success, 20);
    assert.ok(peak > 1, `tasks ran in parallel (peak ${peak})`);
    assert.ok(peak <= 5, `at most 5 task processes at once, saw ${peak}`);
    const log = await api(s, `/jobs/${JOB}/executions/${id}/tasks/7/logs`);
    assert.match(log.body, /hello, t7/, 'the task read its own input through blStartJob');

    // The CLI prints the 20 tasks' logs one after the other: a reader that stops early closes the pipe under it.
    const head = await berthIntoHead(s, ['logs', 'job', JOB, '--execution', id], 1);
    assert.equal(head.code, 0, head.stderr);
    assert.equal(head.stderr, '', 'quiet: no EPIPE trace');
    assert.equal(head.head.split('\n').length, 2, 'head printed its one line');
    const table = await berth(s, ['get', 'executions', 'job', JOB]);
    assert.equal(table.code, 0, table.out);
    const [header, row] = table.stdout.split('\n');
    assert.deepEqual(header.split(/\s+/), [
      'ID',
      'STATUS',
      'TASKS',
      'SUCCEEDED',
      'FAILED',
      'RUNNING',
      'WAITING',
      'AGE',
    ]);
    assert.match(row, new RegExp(`^${id}\\s+succeeded\\s+20\\s+20\\s+0\\s+0\\s+0\\s`));
    const json = JSON.parse((await berth(s, ['get', 'executions', 'job', JOB, '-o', 'json'])).stdout);
    assert.equal(json[0].metadata.id, id);
  });

  it('retries a failing task until it succeeds on its third attempt', async () => {
    const c = await api(s, `/jobs/${JOB}/executions`, {
      method: 'POST',
      json: { tasks: [{ failAttempts: 2 }] },
    });
    const e = await waitExecution(s, JOB, c.body.executionId);
    assert.equal(e.status, 'succeeded', JSON.stringify(e.tasks));
    assert.equal(e.tasks[0].status, 'succeeded');
    assert.equal(e.tasks[0].attempts, 3);
    assert.equal(e.stats.retried, 2);
  });

  it('refuses an execution of a job with no deployed code, and a writable persistent volume with parallel tasks', async () => {
    const j = await api(s, '/jobs', { method: 'POST', json: { metadata: { name: 'empty' }, spec: {} } });
    assert.equal(j.status, 200, JSON.stringify(j.body));
    const c = await api(s, '/jobs/empty/executions', { method: 'POST', json: { tasks: [{}] } });
    assert.equal(c.status, 409);
    assert.match(c.body.detail, /no deployed revision/);
    const v = await api(s, '/jobs', {
      method: 'POST',
      json: {
        metadata: { name: 'vol' },
        spec: {
          runtime: { maxConcurrentTasks: 2 },
          volumes: [{ name: 'data', mountPath: '/data', type: 'persistent' }],
        },
      },
    });
    assert.equal(v.status, 422);
    assert.match(JSON.stringify(v.body), /needs runtime.maxConcurrentTasks 1/);
  });
});
