// Job tasks across the nodes of a cluster (docs/decisions/093-job-tasks-across-nodes.md), on one store and the fake
// runtime, a runtime per node: the leader's runner places each attempt on a node (recorded on the task), that node's
// holding runs it and reports its end, the runner records the outcome; a node whose lease lapsed under its attempts
// has them fail (counted against maxRetries, the node named on the task and on the job) and run again on a live node;
// a second tenant's execution of the same job name is its own. Placement itself is placement.ts's (tested there).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { BuiltApp } from '../../builds/builder.js';
import { SecretBox } from '../../crypto/secret-box.js';
import { KINDS } from '../../kinds/index.js';
import { Instances } from '../../runtime/instances.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { DaemonDriver, type Outcome } from '../../test-support/fake-daemon.js';
import { createExecution } from './job-create.js';
import { JobHolding, placedHere } from './job-holding.js';
import { JobRunner } from './job-runner.js';
import { execKey, type TaskRecord, taskKey } from './job-store.js';

const APP: BuiltApp = {
  key: 'app1',
  dir: '/nonexistent/apps/app1',
  plan: { language: 'node', deps: 'none', buildScript: false, start: 'node job.js' } as never,
  cached: false,
};
const NODES = ['node-a', 'node-b'];

async function cluster(onTask: (node: string, index: string) => Outcome | Promise<Outcome>) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-jobholding-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, KINDS, new SecretBox(randomBytes(32)), { regions: ['local'] });
  const dead = new Set<string>();
  /** The node holding each volume's data, by `<workspace>/<volume>`. */
  const volumeNodes = new Map<string, string>();
  const ran: Record<string, string[]> = { 'node-a': [], 'node-b': [] };
  const drivers = NODES.map(
    (node) =>
      new DaemonDriver({
        onProcess: (_id, p) => {
          ran[node].push(String(p.env?.TASK_INDEX));
          return onTask(node, String(p.env?.TASK_INDEX));
        },
      }),
  );
  const instances = drivers.map((driver) => new Instances({ driver }));
  let turn = 0;
  const runner = new JobRunner({
    resources,
    builder: { builtByKey: () => APP },
    node: 'node-a',
    instances: instances[0],
    logsDir: join(dir, 'logs'),
    // Round robin over the live nodes (the cluster's is placement.ts's best of K).
    nodes: {
      place: (_region, _tasks, room) => {
        const live = NODES.filter((n) => !dead.has(n) && room(n));
        return live.length ? live[turn++ % live.length] : undefined;
      },
      lapsed: (n) => dead.has(n),
      usable: (n) => !dead.has(n),
      volumeNodes: (ws, names) =>
        [...new Set(names.map((v) => volumeNodes.get(`${ws}/${v}`)))].filter((n): n is string => !!n),
      count: () => NODES.length - dead.size,
    },
  });
  const holdings = NODES.map(
    (self, i) =>
      new JobHolding({
        self,
        resources,
        builder: { builtByKey: () => APP },
        rebuild: async () => {
          throw new Error('no source here');
        },
        instances: instances[i],
        holding: () => !dead.has(self),
      }),
  );
  await runner.start();
  for (const h of holdings) h.start();
  const job = async (workspace: string, maxRetries: number, volumes?: object[]) => {
    const ctx = { workspace, parents: [], actor: 'tester' };
    await resources.create(resources.kind('Job'), ctx, {
      metadata: { name: 'nightly' },
      spec: { runtime: { maxConcurrentTasks: 4, maxRetries }, ...(volumes ? { volumes } : {}) },
    });
    return resources.updateStatus(
      { kind: 'Job', workspace, parent: '', name: 'nightly' },
      {
        to: 'DEPLOYED',
        extras: {
          activeRevision: 'rev1',
          revisions: [{ id: 'rev1', app: APP.key, source: 'd', start: 'node job.js', createdAt: '' }],
        },
      },
    );
  };
  const execute = async (workspace: string, maxRetries: number, tasks: number, volumes?: object[]) => {
    const j = await job(workspace, maxRetries, volumes);
    const { id } = await createExecution({ resources, runner, now: Date.now }, workspace, j!, {
      tasks: Array.from({ length: tasks }, (_, i) => ({ i })),
    });
    return id;
  };
  const until = async (workspace: string, id: string, status: string) => {
    let body: unknown;
    for (let i = 0; i < 500; i++) {
      body = (await store.get(execKey(workspace, 'nightly', id)))?.body;
      if ((body as { status?: string })?.status === status) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.fail(`execution ${id} never ${status}: ${JSON.stringify(body)}`);
  };
  const task = async (workspace: string, id: string, index: number) =>
    (await store.get(taskKey(workspace, 'nightly', id, index)))?.body as TaskRecord;
  return {
    store,
    resources,
    drivers,
    volumeNodes,
    runner,
    holdings,
    ran,
    dead,
    execute,
    until,
    task,
    async close() {
      await runner.stop();
      for (const h of holdings) await h.stop();
      for (const d of drivers) await d.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('job tasks across the nodes of a cluster', () => {
  it('places attempts on several nodes, each runs its own and reports its end, the log is kept', async () => {
    const c = await cluster((node, index) => ({ status: 'completed', logs: `task ${index} on ${node}\n` }));
    try {
      const id = await c.execute('ws', 0, 4);
      await c.until('ws', id, 'succeeded');
      assert.deepEqual([c.ran['node-a'].length, c.ran['node-b'].length], [2, 2], JSON.stringify(c.ran));
      const nodes = new Set<string | undefined>();
      for (let i = 0; i < 4; i++) {
        const t = await c.task('ws', id, i);
        assert.equal(t.status, 'succeeded');
        assert.equal(t.ended, undefined, 'the report is cleared once the outcome is stored');
        nodes.add(t.node);
        const log = readFileSync(c.runner.logFile('ws', 'nightly', id, i), 'utf8');
        assert.equal(log, `--- attempt 1 ---\ntask ${i} on ${t.node}\n`);
      }
      assert.deepEqual([...nodes].sort(), NODES);
      // A second tenant's execution of a job of the same name runs its own tasks, and the first's are not its.
      const other = await c.execute('ws2', 0, 1);
      await c.until('ws2', other, 'succeeded');
      assert.equal((await c.store.get(execKey('ws2', 'nightly', id)))?.body, undefined);
    } finally {
      await c.close();
    }
  });

  it('fails the attempts of a node whose lease lapsed, naming it, and retries them on a live node per maxRetries', async () => {
    // node-b's attempts never end: it dies under them.
    const c = await cluster((node) =>
      node === 'node-b' ? new Promise<never>(() => undefined) : { status: 'completed', logs: 'ok\n' },
    );
    try {
      const id = await c.execute('ws', 1, 4);
      for (let w = 0; w < 300 && c.ran['node-b'].length < 2; w++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(c.ran['node-b'].length, 2);
      c.dead.add('node-b');
      await c.until('ws', id, 'succeeded');
      const lost = [];
      for (let i = 0; i < 4; i++) {
        const t = await c.task('ws', id, i);
        if (!t.conditions?.some((x) => x.reason === 'lost')) continue;
        lost.push(i);
        // Counted as a failed attempt (a retry), not as a lost one.
        assert.equal(t.attempts, 2);
        assert.equal(t.lost ?? 0, 0);
        assert.equal(t.node, 'node-a');
        assert.match(
          t.conditions.find((x) => x.reason === 'lost')?.message ?? '',
          /^lost: node node-b, which ran attempt 1, stopped; its process is gone\. It runs again on a live node, as a retry/,
        );
        const log = readFileSync(c.runner.logFile('ws', 'nightly', id, i), 'utf8');
        assert.match(
          log,
          /--- attempt 1 ---\n\(no output: node node-b stopped while it ran this attempt\)\n--- attempt 2 ---\nok\n/,
        );
      }
      assert.equal(lost.length, 2);
      const job = await c.store.get({ kind: 'Job', workspace: 'ws', parent: '', name: 'nightly' });
      assert.deepEqual(
        job?.body.events.filter((e: any) => e.message.startsWith('lost:')).map((e: any) => e.message),
        [
          `lost: node node-b, which ran tasks ${lost.join(', ')} of execution ${id}, stopped; their processes are gone. Each attempt counts as failed and runs again on a live node while its maxRetries allow`,
        ],
      );
    } finally {
      await c.close();
    }
  });

  it('fails the execution when the lost attempt had no retry left', async () => {
    const c = await cluster(() => new Promise<never>(() => undefined));
    try {
      const id = await c.execute('ws', 0, 1);
      for (let w = 0; w < 300 && !Object.values(c.ran).flat().length; w++)
        await new Promise((r) => setTimeout(r, 10));
      const t = await c.task('ws', id, 0);
      c.dead.add(t.node as string);
      await c.until('ws', id, 'failed');
      const after = await c.task('ws', id, 0);
      assert.equal(after.status, 'failed');
      assert.match(after.conditions?.at(-1)?.message ?? '', /No retry is left \(maxRetries\)$/);
    } finally {
      await c.close();
    }
  });

  it("runs a job's tasks on the node holding its volumes' data, and waits while that node is away", async () => {
    const c = await cluster((node, index) => ({ status: 'completed', logs: `task ${index} on ${node}\n` }));
    try {
      const ctx = { workspace: 'ws', parents: [], actor: 'tester' };
      await c.resources.create(c.resources.kind('Volume'), ctx, {
        metadata: { name: 'data' },
        spec: { size: 64 },
      });
      await c.resources.updateStatus(
        { kind: 'Volume', workspace: 'ws', parent: '', name: 'data' },
        { to: 'DEPLOYED', extras: { node: 'node-b' } },
      );
      c.volumeNodes.set('ws/data', 'node-b');
      c.drivers[1].volumes.set('ws/data', { sizeMb: 64 });
      const volumes = [{ name: 'data', mountPath: '/data', readOnly: true }];
      const id = await c.execute('ws', 0, 4, volumes);
      await c.until('ws', id, 'succeeded');
      assert.deepEqual([c.ran['node-a'].length, c.ran['node-b'].length], [0, 4], JSON.stringify(c.ran));
      for (let i = 0; i < 4; i++) assert.equal((await c.task('ws', id, i)).node, 'node-b');
      // node-b away: the next execution's tasks wait for it, saying so, and run there once it is back.
      c.dead.add('node-b');
      const { id: next } = await createExecution(
        { resources: c.resources, runner: c.runner, now: Date.now },
        'ws',
        (await c.store.get({ kind: 'Job', workspace: 'ws', parent: '', name: 'nightly' }))!,
        { tasks: [{ i: 0 }] },
      );
      let events: string[] = [];
      for (let i = 0; i < 100 && !events.some((m) => m.includes('node node-b, which holds')); i++) {
        await new Promise((r) => setTimeout(r, 20));
        const o = await c.store.get({ kind: 'Job', workspace: 'ws', parent: '', name: 'nightly' });
        events = (o?.body.events ?? []).map((e: { message: string }) => e.message);
      }
      assert.ok(
        events.includes(
          `execution ${next}: its tasks wait for node node-b, which holds its volumes' data and is not answering or drained`,
        ),
        JSON.stringify(events),
      );
      assert.equal(c.ran['node-a'].length, 0, 'never run on a node without the data');
      c.dead.delete('node-b');
      await c.until('ws', next, 'succeeded');
      assert.deepEqual([c.ran['node-a'].length, c.ran['node-b'].length], [0, 5]);
    } finally {
      await c.close();
    }
  });

  it('says which attempts a node runs: placed on it, running, not reported yet', () => {
    const t = {
      index: 0,
      input: {},
      status: 'running',
      attempts: 2,
      node: 'node-b',
      sandbox: 'job-x-0-2',
    } as const;
    assert.equal(placedHere(t, 'node-b'), true);
    assert.equal(placedHere(t, 'node-a'), false);
    assert.equal(placedHere({ ...t, status: 'pending' }, 'node-b'), false);
    const report = { exitCode: 0, timedOut: false, logs: '' };
    assert.equal(placedHere({ ...t, ended: { attempt: 2, ...report } }, 'node-b'), false);
    // A report of an earlier attempt does not count for this one.
    assert.equal(placedHere({ ...t, ended: { attempt: 1, ...report } }, 'node-b'), true);
  });
});
