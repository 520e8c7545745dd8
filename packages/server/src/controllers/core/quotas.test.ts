// The quotas' arithmetic and wording: what a sandbox holds, which quota a request passes first, and refusals that
// name the quota, its limit, the use and what to do; the defaults, derived from the host.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultQuotas, loadConfig, type QuotaLimits } from '../../config.js';
import { emptyUsage, judge, sandboxMemoryMb, sandboxUse, scaledSpecRefusal, scaleNote } from './quotas.js';

const LIMITS: QuotaLimits = { memoryMb: 1024, sandboxes: 3, replicas: 4, builds: 2, jobTasks: 2 };

describe('workspace quotas', () => {
  it('a sandbox holds its memory (4096 MB unless it says) from its create until TERMINATED, whatever else', () => {
    assert.equal(sandboxMemoryMb({ spec: { runtime: { memory: 512 } } }), 512);
    assert.equal(sandboxMemoryMb({ spec: {} }), 4096);
    for (const status of ['DEPLOYING', 'DEPLOYED', 'FAILED', 'DEACTIVATED', 'DELETING'])
      assert.equal(sandboxMemoryMb({ status, spec: { runtime: { memory: 256 } } }), 256, status);
    assert.equal(sandboxMemoryMb({ status: 'TERMINATED', spec: { runtime: { memory: 256 } } }), undefined);
    const use = sandboxUse([
      { body: { spec: { runtime: { memory: 256 } } } },
      { body: { status: 'TERMINATED', spec: { runtime: { memory: 256 } } } },
      { body: { status: 'DELETING', spec: { runtime: { memory: 512 } } } },
    ]);
    assert.deepEqual(use, { count: 2, memoryMb: 768 });
  });

  it('the count is judged first, then the memory of everything the workspace runs', () => {
    const use = emptyUsage();
    use.sandboxes = 2;
    use.memoryMb.sandboxes = 512;
    use.memoryMb.replicas = 256;
    const what = { quota: 'sandboxes' as const, askMb: 256, noun: 'this sandbox', fix: 'Delete a sandbox' };
    assert.equal(judge('a', LIMITS, use, what), undefined, '2 + 1 sandboxes, 768 + 256 MB fit exactly');
    const memory = judge('a', LIMITS, use, { ...what, askMb: 512 });
    assert.equal(memory?.quota, 'memoryMb');
    assert.equal(memory?.limit, 1024);
    assert.equal(memory?.used, 768);
    assert.match(
      memory?.message ?? '',
      /workspace "a" is at its memory quota: 768 MB of 1024 MB in use \(sandboxes 512 MB, replicas 256 MB\), and this sandbox asks for 512 MB\. Delete a sandbox, or ask the server's operator to raise BERTH_QUOTA_MEMORY_MB/,
    );
    use.sandboxes = 3;
    const count = judge('a', LIMITS, use, what);
    assert.equal(count?.quota, 'sandboxes');
    assert.match(count?.message ?? '', /at its sandboxes quota: 3 of 3 sandboxes .*BERTH_QUOTA_SANDBOXES/);
  });

  it("an agent's spec is refused only when it can never run: one replica or minScale replicas do not fit", () => {
    assert.equal(scaledSpecRefusal('a', LIMITS, 'Agent', { memory: 256, minScale: 4 }), undefined);
    assert.equal(scaledSpecRefusal('a', LIMITS, 'Agent', { memory: 1024, minScale: 0 }), undefined);
    const big = scaledSpecRefusal('a', LIMITS, 'Agent', { memory: 2048, minScale: 0 });
    assert.deepEqual(
      big?.errors.map((e) => e.pointer),
      ['/spec/runtime/memory'],
    );
    const many = scaledSpecRefusal('a', LIMITS, 'Function', { memory: 128, minScale: 5 });
    assert.match(many?.message ?? '', /minScale 5 .*replicas quota \(4\)/);
    const heavy = scaledSpecRefusal('a', LIMITS, 'Agent', { memory: 512, minScale: 3 });
    assert.match(
      heavy?.message ?? '',
      /minScale 3 × 512 MB is 1536 MB, more than .*memory quota \(1024 MB\)/,
    );
  });

  it('a maxScale the quotas cap is said in the deploy event, never silently', () => {
    assert.equal(scaleNote(LIMITS, 2, 512), '');
    assert.match(
      scaleNote(LIMITS, 10, 128),
      /maxScale 10 is capped at 4 by the workspace's replicas quota \(4\)/,
    );
    assert.match(
      scaleNote(LIMITS, 10, 512),
      /capped at 2 by the workspace's memory quota \(1024 MB: 2 replicas/,
    );
  });

  it('defaults: three quarters of the host memory, 100 sandboxes, 50 replicas, 2 builds, half the task pool', () => {
    assert.deepEqual(defaultQuotas(24_105), {
      memoryMb: 18_078,
      sandboxes: 100,
      replicas: 50,
      builds: 2,
      jobTasks: 25,
    });
    assert.equal(defaultQuotas(8192, 7).jobTasks, 4);
    const cfg = loadConfig({}, { BERTH_QUOTA_MEMORY_MB: '2048', BERTH_QUOTA_JOB_TASKS: '3' });
    assert.equal(cfg.quotas.memoryMb, 2048);
    assert.equal(cfg.quotas.jobTasks, 3);
    assert.equal(loadConfig({}, { BERTH_JOB_MAX_TASKS: '10' }).quotas.jobTasks, 5);
    for (const bad of ['0', '-1', '1.5', 'lots'])
      assert.throws(() => loadConfig({}, { BERTH_QUOTA_SANDBOXES: bad }), /BERTH_QUOTA_SANDBOXES/);
  });
});
