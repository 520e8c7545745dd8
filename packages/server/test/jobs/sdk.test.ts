// The unmodified @blaxel/core against a job deployed from the catalog's template: run, createExecution with env
// and memory overrides, waitForExecution, getExecution and listExecutions; the tasks read their input (and the
// env override) through blStartJob, as their logs show.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { api, deployJob } from './support.js';

const SCRIPT = join(import.meta.dirname, 'blaxel-jobs.mjs');

describe('jobs through @blaxel/core', () => {
  let s: SandboxServer;
  let work: string;
  before(async () => {
    s = await startSandboxServer();
    work = mkdtempSync(join(tmpdir(), 'berth-jobs-sdk-'));
    await deployJob(s, join(work, 'job'), 'sdk-job', { memory: 256, maxConcurrentTasks: 2 });
  });
  after(async () => {
    await s.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('blJob runs executions to the end, with overrides, and lists them', async () => {
    const out = await runBlaxelScript(SCRIPT, s, { JOB_NAME: 'sdk-job' }, 110_000);
    const line = out.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, out);
    const r = JSON.parse(line.slice('RESULT '.length));
    const why = async () =>
      JSON.stringify((await api(s, `/jobs/sdk-job/executions/${r.first}`)).body) +
      (await api(s, `/jobs/sdk-job/executions/${r.first}/tasks/0/logs`)).body;
    assert.equal(r.firstStatus, 'succeeded', await why());
    assert.equal(r.firstSuccess, 2);
    assert.equal(r.secondStatus, 'succeeded');
    assert.equal(r.memoryOverride, 384);
    assert.deepEqual(Object.keys(r.envOverride), ['GREETING'], 'override names shown, values never');
    assert.deepEqual([...r.listed].sort(), [r.first, r.second].sort());
    const log0 = await api(s, `/jobs/sdk-job/executions/${r.first}/tasks/1/logs`);
    assert.match(log0.body, /hello, sdk-b/, 'blStartJob gave task 1 its own input');
    const log1 = await api(s, `/jobs/sdk-job/executions/${r.second}/tasks/0/logs`);
    assert.match(log1.body, /env GREETING=from-the-override/);
  });
});
