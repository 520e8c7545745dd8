// A server killed with SIGKILL in the middle of an execution and started again on the same data dir: attempts
// still running are re-adopted (their sandboxes outlive the server), and every task ends succeeded exactly once.
// Each attempt prints a marker (`MARKER task=<i> attempt=<n> done`) when it finishes its work; the test counts them
// in the per-task logs, which keep every attempt's output.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { removeAllSandboxes, startSandboxServer } from '../sandboxes/support.js';
import { api, deployJob, type Target, taskProcesses, waitExecution } from './support.js';
import { serve, stopped } from '../serve-process.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const TASKS = 20;

test('after a kill -9 of the server mid-execution, every task succeeds exactly once', {
  timeout: 400_000,
}, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-jobs-restart-'));
  const work = mkdtempSync(join(tmpdir(), 'berth-jobs-restart-src-'));
  let server: ChildProcess | undefined;
  try {
    // Built by an in-process server on the same data dir (`berth serve` runs with umask 077, under which a build
    // sandbox cannot read the unpacked source: a builder issue outside this test), then served by `berth serve`.
    const builder = await startSandboxServer({}, dataDir);
    await deployJob(builder, join(work, 'job'), 'crash', {
      memory: 256,
      maxConcurrentTasks: 5,
      timeout: 120,
    });
    await builder.close();
    const first = await serve(dataDir);
    server = first.child;
    const adminKey = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim();
    let s: Target = { url: first.url, adminKey, dataDir };
    const tasks = Array.from({ length: TASKS }, (_, i) => ({ name: `t${i}`, sleep: 2 }));
    const c = await api(s, '/jobs/crash/executions', { method: 'POST', json: { tasks } });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const id = c.body.executionId;
    // Kill once some tasks have finished and others are running.
    for (let i = 0; i < 1200; i++) {
      const e = await api(s, `/jobs/crash/executions/${id}`);
      if (e.body.stats.success >= 3 && taskProcesses(id).length > 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(taskProcesses(id).length > 0, 'tasks were running when the server died');
    server.kill('SIGKILL');
    await stopped(server);

    const second = await serve(dataDir);
    server = second.child;
    s = { ...s, url: second.url };
    const e = await waitExecution(s, 'crash', id);
    assert.equal(e.status, 'succeeded', JSON.stringify(e.stats));
    assert.equal(e.stats.success, TASKS);
    for (let i = 0; i < TASKS; i++) {
      const log = (await api(s, `/jobs/crash/executions/${id}/tasks/${i}/logs`)).body as string;
      const done = log.match(new RegExp(`MARKER task=${i} attempt=\\d+ done`, 'g')) ?? [];
      assert.equal(done.length, 1, `task ${i} finished its work exactly once:\n${log}`);
    }
  } finally {
    if (server) {
      server.kill('SIGTERM');
      await stopped(server);
    }
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
    rmSync(work, { recursive: true, force: true });
  }
});
