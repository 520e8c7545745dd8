// The review's finding N17 for jobs: the server's task pool (BERTH_JOB_MAX_TASKS) was one pool for every tenant, so
// one execution could hold all of it. With a job task quota of 2, tenant A's execution of 6 parallel tasks never runs
// more than 2 at once (counted from /proc), its job says why the others wait, and tenant B's execution runs beside
// it; an execution whose task could never fit the memory quota is refused with a 429 naming it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { newTenant } from '../../src/test-support/tenants.js';
import { type SandboxServer, startSandboxServer } from '../sandboxes/support.js';
import { api, deployJob, type Target, taskProcesses, waitExecution } from './support.js';

const JOB = 'batch';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('job task slots per workspace', () => {
  let s: SandboxServer;
  let work: string;
  let a: Target;
  let b: Target;
  before(async () => {
    s = await startSandboxServer({ BERTH_QUOTA_JOB_TASKS: '2', BERTH_QUOTA_MEMORY_MB: '4096' });
    work = mkdtempSync(join(tmpdir(), 'berth-job-quotas-'));
    for (const home of ['tenant-a', 'tenant-b']) {
      const t = await newTenant(s, home);
      const target = { url: s.url, adminKey: t.key, dataDir: s.dataDir, workspace: home };
      await deployJob(target, join(work, home), JOB, { memory: 256, maxConcurrentTasks: 6, timeout: 120 });
      if (home === 'tenant-a') a = target;
      else b = target;
    }
  });
  after(async () => {
    await s?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("tenant A's tasks never take more than its slots while tenant B's execution runs beside them", async () => {
    const tasks = Array.from({ length: 6 }, (_, i) => ({ name: `a${i}`, sleep: 1.5 }));
    const ca = await api(a, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks } });
    assert.equal(ca.status, 200, JSON.stringify(ca.body));
    const ida = ca.body.executionId;
    let peak = 0;
    let done = false;
    const sampling = (async () => {
      while (!done) {
        peak = Math.max(peak, taskProcesses(ida).length);
        await sleep(20);
      }
    })();
    // Started once A's slots are taken: B's tasks do not queue behind A's.
    while (taskProcesses(ida).length < 2) await sleep(20);
    const cb = await api(b, `/jobs/${JOB}/executions`, {
      method: 'POST',
      json: { tasks: [{ name: 'b0' }, { name: 'b1' }] },
    });
    assert.equal(cb.status, 200, JSON.stringify(cb.body));
    const eb = await waitExecution(b, JOB, cb.body.executionId);
    const ea = await waitExecution(a, JOB, ida);
    done = true;
    await sampling;
    assert.equal(eb.status, 'succeeded', JSON.stringify(eb.stats));
    assert.equal(ea.status, 'succeeded', JSON.stringify(ea.stats));
    assert.ok(peak <= 2, `at most 2 of tenant A's tasks at once, saw ${peak}`);
    assert.ok(peak === 2, `tenant A's tasks used both its slots (peak ${peak})`);
    assert.ok(
      Date.parse(eb.metadata.completedAt) < Date.parse(ea.metadata.completedAt),
      "tenant B's execution ended while tenant A's was still running",
    );
    const events = ((await api(a, `/jobs/${JOB}`)).body.events as { message: string }[]).map(
      (e) => e.message,
    );
    assert.ok(
      events.some((m) =>
        m.includes(
          `execution ${ida}: tasks wait for the workspace's quotas: workspace "tenant-a" is at its jobTasks quota: 2 of 2`,
        ),
      ),
      JSON.stringify(events),
    );
  });

  it('an execution whose task could never fit the memory quota is a 429 naming it', async () => {
    const r = await api(a, `/jobs/${JOB}/executions`, { method: 'POST', json: { memory: 8192 } });
    assert.equal(r.status, 429, JSON.stringify(r.body));
    assert.equal(r.body.error, 'QUOTA_EXCEEDED');
    assert.match(
      r.body.detail,
      /asks for 8192 MB, more than workspace "tenant-a"'s memory quota \(4096 MB\)/,
    );
    const list = await api(a, `/jobs/${JOB}/executions`);
    assert.equal(list.body.length, 1, 'nothing was created');
  });
});
