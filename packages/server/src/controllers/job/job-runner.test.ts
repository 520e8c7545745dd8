// The job runner over a real store, the fake runtime with a stand-in daemon per instance (the task's outcome chosen by
// the test) and an injected clock: each task runs in an instance of its own, owned by its job; an execution ends once
// its tasks have; a failing task is retried up to maxRetries after its backoff (the clock moved past it), then fails
// the execution; maxConcurrentTasks bounds the tasks at once; a cancel stops what runs and cancels what waits.
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
import type { ProcessRequest } from '../../sandbox-api/schema.js';
import { Resources } from '../../store/resources.js';
import { SqliteStore } from '../../store/sqlite.js';
import { DaemonDriver, type Outcome } from '../../test-support/fake-daemon.js';
import { createExecution } from './job-create.js';
import { JobRunner, type JobRunnerDeps } from './job-runner.js';
import { execKey, taskKey } from './job-store.js';

const CTX = { workspace: 'ws', parents: [], actor: 'tester' };
const APP: BuiltApp = {
  key: 'app1',
  dir: '/nonexistent/apps/app1',
  plan: { language: 'node', deps: 'none', buildScript: false, start: 'node job.js' } as never,
  cached: false,
};

async function setup(
  runtime: Record<string, number>,
  onTask: (p: ProcessRequest) => Outcome | Promise<Outcome>,
  app: Pick<JobRunnerDeps, 'rebuild' | 'node'> & { built?: () => boolean } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-jobrunner-'));
  const store = new SqliteStore(join(dir, 'berth.db'));
  const resources = new Resources(store, KINDS, new SecretBox(randomBytes(32)), { regions: ['local'] });
  let skewMs = 0;
  const now = () => Date.now() + skewMs;
  const driver = new DaemonDriver({ onProcess: (_id, p) => onTask(p) });
  const runner = new JobRunner({
    resources,
    builder: {
      builtByKey: (_ws, key) => (key === APP.key && (app.built?.() ?? true) ? APP : undefined),
    },
    rebuild: app.rebuild,
    node: app.node,
    instances: new Instances({ driver }),
    logsDir: join(dir, 'logs'),
    now,
  });
  await runner.start();
  await resources.create(resources.kind('Job'), CTX, { metadata: { name: 'nightly' }, spec: { runtime } });
  const key = { kind: 'Job', workspace: 'ws', parent: '', name: 'nightly' };
  const job = await resources.updateStatus(key, {
    to: 'DEPLOYED',
    extras: {
      activeRevision: 'rev1',
      revisions: [{ id: 'rev1', app: APP.key, source: 'd', start: 'node job.js', createdAt: '' }],
    },
  });
  const execute = async (tasks: unknown[]) => {
    const { id } = await createExecution({ resources, runner, now }, 'ws', job!, { tasks });
    return id;
  };
  const execution = async (id: string) => (await store.get(execKey('ws', 'nightly', id)))?.body;
  const until = async (id: string, status: string) => {
    for (let i = 0; i < 500; i++) {
      if ((await execution(id))?.status === status) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.fail(`execution ${id} never ${status}: ${JSON.stringify(await execution(id))}`);
  };
  return {
    store,
    resources,
    dir,
    driver,
    runner,
    execute,
    until,
    skew: (ms: number) => {
      skewMs += ms;
    },
    async close() {
      await runner.stop();
      await driver.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('the job runner', () => {
  it('runs each task in an instance of its own owned by the job, and ends the execution once all have', async () => {
    const owners: unknown[] = [];
    const env = await setup({ maxConcurrentTasks: 3 }, (p) => ({
      status: 'completed',
      logs: `task ${p.env?.TASK_INDEX}\n`,
    }));
    try {
      const before = env.driver.creations;
      const origEnsure = env.driver.ensure.bind(env.driver);
      env.driver.ensure = async (id, spec) => {
        owners.push(spec.owner);
        return origEnsure(id, spec);
      };
      const id = await env.execute([{ n: 1 }, { n: 2 }, { n: 3 }]);
      await env.until(id, 'succeeded');
      assert.equal(env.driver.creations - before, 3);
      assert.deepEqual(
        new Set(owners.map((o) => JSON.stringify(o))),
        new Set([JSON.stringify({ kind: 'Job', workspace: 'ws', name: 'nightly', role: 'task' })]),
      );
      const log = readFileSync(env.runner.logFile('ws', 'nightly', id, 1), 'utf8');
      assert.match(log, /--- attempt 1 ---\ntask 1\n/);
    } finally {
      await env.close();
    }
  });

  it('retries a failing task after its backoff, up to maxRetries, then fails the execution', async () => {
    let attempts = 0;
    const env = await setup({ maxRetries: 2 }, () => {
      attempts++;
      return { status: 'failed', exitCode: 7, logs: 'no\n' };
    });
    try {
      const id = await env.execute([{}]);
      for (let i = 0; i < 3; i++) {
        for (let w = 0; w < 200 && attempts <= i; w++) await new Promise((r) => setTimeout(r, 10));
        // The retry waits for its backoff: the clock moves past it.
        env.skew(60_000);
      }
      await env.until(id, 'failed');
      assert.equal(attempts, 3, 'the first attempt and two retries');
    } finally {
      await env.close();
    }
  });

  it('runs no more tasks at once than maxConcurrentTasks', async () => {
    let running = 0;
    let most = 0;
    const env = await setup({ maxConcurrentTasks: 2 }, async () => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 30));
      running--;
      return { status: 'completed' };
    });
    try {
      const id = await env.execute([{}, {}, {}, {}, {}]);
      await env.until(id, 'succeeded');
      assert.equal(most, 2);
    } finally {
      await env.close();
    }
  });

  it('cancels: a running task is stopped, waiting ones are cancelled, the execution ends cancelled', async () => {
    let release!: () => void;
    const env = await setup(
      { maxConcurrentTasks: 1 },
      () =>
        new Promise<Outcome>((r) => {
          release = () => r({ status: 'stopped', exitCode: 143 });
        }),
    );
    try {
      const id = await env.execute([{}, {}]);
      for (let w = 0; w < 200 && !release; w++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(await env.runner.cancel('ws', 'nightly', id), true);
      release();
      await env.until(id, 'cancelled');
      assert.deepEqual(env.runner.running('ws', 'nightly'), []);
    } finally {
      await env.close();
    }
  });

  // A server that took over the lead finds an execution's app not built here (decision 077): it builds it again, and
  // when that fails the waiting tasks end per the job's retry policy instead of waiting for ever.
  it('builds an execution app missing here again, then runs its tasks', async () => {
    let built = false;
    const asked: string[] = [];
    let ran = 0;
    const env = await setup(
      {},
      () => {
        ran++;
        return { status: 'completed' };
      },
      {
        built: () => built,
        rebuild: async (ws, job, app) => {
          asked.push(`${ws}/${job}/${app}`);
          await new Promise((r) => setTimeout(r, 50));
          built = true;
        },
      },
    );
    try {
      const id = await env.execute([{}, {}]);
      await env.until(id, 'succeeded');
      assert.deepEqual(asked, ['ws/nightly/app1'], 'one build for the execution, not one per task');
      assert.equal(ran, 2);
    } finally {
      await env.close();
    }
  });

  it("ends the tasks waiting for an app that cannot be built here per the job's retry policy, naming the failure", async () => {
    let builds = 0;
    let ran = 0;
    const env = await setup(
      { maxRetries: 1 },
      () => {
        ran++;
        return { status: 'completed' };
      },
      {
        built: () => false,
        rebuild: async () => {
          builds++;
          throw new Error(
            'the build of revision rev1 failed: npm run build exited with code 1\nBUILD_BROKEN is set',
          );
        },
      },
    );
    try {
      const id = await env.execute([{}, {}]);
      // The first failure spends an attempt of each task; the retry waits for its backoff (the clock moves past it).
      for (let w = 0; w < 300 && builds < 1; w++) await new Promise((r) => setTimeout(r, 10));
      for (let w = 0; w < 300 && builds < 2; w++) {
        env.skew(60_000);
        await new Promise((r) => setTimeout(r, 20));
      }
      await env.until(id, 'failed');
      assert.equal(ran, 0, 'no task process ran');
      assert.equal(builds, 2, 'the first attempt and one retry, as maxRetries says');
      for (const index of [0, 1]) {
        const t = (await env.store.get(taskKey('ws', 'nightly', id, index)))?.body;
        assert.equal(t?.status, 'failed');
        assert.equal(t?.attempts, 2);
        assert.deepEqual(
          t?.conditions.map((c: any) => c.reason),
          ['build-failed', 'build-failed'],
        );
        assert.match(
          t?.conditions[1].message,
          /attempt 2: app app1 could not be built on this server: .*BUILD_BROKEN/s,
        );
        assert.match(
          readFileSync(env.runner.logFile('ws', 'nightly', id, index), 'utf8'),
          /--- attempt 2 ---\n\(no output: app app1 could not be built/,
        );
      }
      const job = await env.store.get({ kind: 'Job', workspace: 'ws', parent: '', name: 'nightly' });
      const said = job?.body.events.map((e: any) => e.message).join('\n');
      assert.match(
        said,
        new RegExp(
          `execution ${id}: app app1 could not be built on this server: .*2 waiting task\\(s\\) spent an attempt, 2 of them failed`,
          's',
        ),
      );
    } finally {
      await env.close();
    }
  });
});
