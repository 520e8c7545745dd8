// Job tasks placed across the nodes of a cluster (docs/decisions/093-job-tasks-across-nodes.md): three `berth serve`
// on one PostgreSQL, the TypeScript job template deployed with `berth deploy`. An execution's tasks run on more than
// one node (each task's read names its `node`); each task's log is read, and followed, through a server that did not
// run it; a second tenant reads none of it through any server. Then kill -9 of a follower running a task: that task's
// attempt fails naming the node and runs again on a live node (a retry, per the job's maxRetries 2), and the
// execution succeeds. An execution cancelled through a follower stops its tasks wherever they run; a follower drained
// while it runs a task finishes it there and takes no new one. Last, kill -9 of
// the leader while tasks run on the follower left: they run on and the new leader records their ends, and the logs of
// attempts that ended under the dead leader read the same through the new one.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { peerToken } from '../../src/crypto/peer-token.js';
import { type Proc, sleep } from './cluster-support.js';
import { JOB, useFlowsCluster } from './flows-support.js';

describe('job tasks placed across the nodes of a cluster', () => {
  const { cluster, tenant, execution, ended } = useFlowsCluster('job-nodes', [JOB]);
  const { api } = cluster;
  const tasksOf = async (p: Proc, id: string): Promise<any[]> =>
    (await api(p, `/jobs/${JOB}/executions/${id}/tasks`)).json();

  let first = '';
  it("runs an execution's tasks on several nodes, and any server reads their logs", async () => {
    const b = cluster.node('node-b');
    first = await execution(
      b,
      Array.from({ length: 6 }, (_, i) => ({ name: `t${i}`, sleep: 1 })),
    );
    const e = await ended(b, first);
    assert.equal(e.status, 'succeeded', JSON.stringify(e));
    const tasks = await tasksOf(cluster.node('node-c'), first);
    const placed = tasks.map((t) => [t.index, t.node, t.attempts]);
    process.stdout.write(`# tasks placed: ${JSON.stringify(placed)}\n`);
    assert.ok(new Set(tasks.map((t) => t.node)).size >= 2, JSON.stringify(placed));
    for (const t of tasks) {
      assert.ok(['node-a', 'node-b', 'node-c'].includes(t.node), JSON.stringify(t));
      const via = cluster.procs.find((p) => p.id !== t.node) as Proc;
      const path = `/jobs/${JOB}/executions/${first}/tasks/${t.index}/logs`;
      const r = await api(via, path);
      const text = await r.text();
      assert.equal(r.status, 200, text);
      // Its last attempt's output (on a loaded host a node may miss its lease and have an attempt taken as lost and
      // run again: each earlier attempt is then one its condition says was lost).
      const n = t.attempts;
      if (n > 1)
        assert.ok(
          t.conditions.filter((c: any) => c.reason === 'lost').length === n - 1,
          JSON.stringify(t.conditions),
        );
      assert.match(text, new RegExp(`--- attempt ${n} ---\\n[^]*MARKER task=${t.index} attempt=${n} done`));
      const f = await api(via, `${path}?follow=true`);
      assert.equal(f.status, 200);
      assert.match(await f.text(), new RegExp(`MARKER task=${t.index} attempt=${n} done`));
    }
  });

  it('a second tenant reads none of the execution, its tasks or their logs, through any server', async () => {
    const t = tenant();
    for (const p of cluster.procs)
      for (const path of [
        `/jobs/${JOB}/executions/${first}`,
        `/jobs/${JOB}/executions/${first}/tasks`,
        `/jobs/${JOB}/executions/${first}/tasks/0/logs`,
        `/jobs/${JOB}/executions/${first}/tasks/0/logs?follow=true`,
      ]) {
        const r = await api(p, path, { key: t.key });
        const text = await r.text();
        assert.equal(r.status, 404, `${p.id} ${path}: ${text}`);
        assert.doesNotMatch(text, /MARKER/);
      }
  });

  it('an execution cancelled through a follower stops its tasks on every node, and their sandboxes go', async () => {
    const [a, b, c] = ['node-a', 'node-b', 'node-c'].map((id) => cluster.node(id));
    const id = await execution(
      c,
      Array.from({ length: 4 }, (_, i) => ({ name: `c${i}`, sleep: 60 })),
    );
    let tasks: any[] = [];
    for (let i = 0; i < 600; i++) {
      tasks = await tasksOf(a, id);
      if (tasks.some((t) => t.status === 'running' && t.node !== 'node-a')) break;
      await sleep(100);
    }
    assert.ok(
      tasks.some((t) => t.status === 'running' && t.node !== 'node-a'),
      `no task ran on a follower: ${JSON.stringify(tasks.map((t) => [t.status, t.node]))}`,
    );
    // The attempts' sandboxes, on the nodes running them (this execution's are the only tasks running now).
    const attemptDirs = () =>
      cluster.procs.flatMap((p) =>
        // A node that never ran a sandbox has no sandboxes directory yet.
        (existsSync(join(p.dir, 'sandboxes')) ? readdirSync(join(p.dir, 'sandboxes')) : [])
          .filter((d) => /^job-[0-9a-f]{12}-\d+-\d+$/.test(d))
          .map((d) => `${p.id}/${d}`),
      );
    for (let i = 0; i < 100 && attemptDirs().every((d) => d.startsWith('node-a/')); i++) await sleep(100);
    const running = attemptDirs();
    assert.ok(
      running.some((d) => !d.startsWith('node-a/')),
      JSON.stringify(running),
    );
    const r = await api(b, `/jobs/${JOB}/executions/${id}`, { method: 'DELETE' });
    assert.equal(r.status, 200, await r.text());
    const e = await ended(b, id);
    assert.equal(e.status, 'cancelled', JSON.stringify(e));
    for (const t of await tasksOf(c, id)) assert.notEqual(t.status, 'running', JSON.stringify(t));
    for (let i = 0; i < 200 && attemptDirs().some((d) => running.includes(d)); i++) await sleep(100);
    assert.deepEqual(
      attemptDirs().filter((d) => running.includes(d)),
      [],
      'the cancelled attempts left their sandboxes',
    );
  });

  it('a follower drained while it runs a task finishes it there, takes no new one, and then holds nothing', async () => {
    const a = cluster.node('node-a');
    const id = await execution(
      a,
      Array.from({ length: 4 }, (_, i) => ({ name: `d${i}`, sleep: 6 })),
    );
    let running: any;
    for (let i = 0; i < 600 && !running; i++) {
      running = (await tasksOf(a, id)).find((t) => t.status === 'running' && t.node && t.node !== 'node-a');
      if (!running) await sleep(100);
    }
    assert.ok(running, 'no task ran on a follower');
    const drained = running.node as string;
    const r = await api(a, `/nodes/${drained}/drain`, { method: 'POST' });
    assert.equal(r.status, 200, await r.text());
    try {
      const e = await ended(a, id);
      assert.equal(e.status, 'succeeded', JSON.stringify(e));
      const t = (await tasksOf(a, id))[running.index];
      // Finished where it ran, in the attempt it was in: a drained node is not a dead one.
      assert.equal(t.status, 'succeeded', JSON.stringify(t));
      assert.equal(t.node, drained, JSON.stringify(t));
      assert.equal(t.attempts, running.attempts, JSON.stringify(t));
      const next = await execution(
        a,
        Array.from({ length: 4 }, (_, i) => ({ name: `n${i}`, sleep: 1 })),
      );
      assert.equal((await ended(a, next)).status, 'succeeded');
      const placed = (await tasksOf(a, next)).map((x) => x.node);
      assert.ok(!placed.includes(drained), `a task went to drained ${drained}: ${JSON.stringify(placed)}`);
      // Its heartbeat says it runs nothing (within a quarter of a lease), and the node read says it holds nothing.
      let node: any;
      for (let i = 0; i < 100; i++) {
        node = (await (await api(a, '/nodes')).json()).find((n: any) => n.id === drained);
        if (node?.empty) break;
        await sleep(200);
      }
      assert.equal(node?.empty, true, JSON.stringify(node));
    } finally {
      assert.equal((await api(a, `/nodes/${drained}/undrain`, { method: 'POST' })).status, 200);
    }
  });

  it('kill -9 of a follower running a task: the task runs again on a live node and the execution succeeds', async () => {
    const a = cluster.node('node-a');
    const id = await execution(
      a,
      Array.from({ length: 4 }, (_, i) => ({ name: `k${i}`, sleep: 12 })),
    );
    let victim: any;
    for (let i = 0; i < 600 && !victim; i++) {
      const tasks = await tasksOf(a, id);
      victim = tasks.find((t) => t.status === 'running' && t.node && t.node !== 'node-a');
      if (!victim) await sleep(100);
    }
    assert.ok(victim, 'no task ran on a follower');
    // Its log followed through the third server while it runs: its output arrives live from the node running it
    // (through the leader, which serves task logs), and the follow goes on through the kill to the retry's end.
    const third = cluster.procs.find((p) => p.id !== 'node-a' && p.id !== victim.node) as Proc;
    const follow = await api(third, `/jobs/${JOB}/executions/${id}/tasks/${victim.index}/logs?follow=true`);
    assert.equal(follow.status, 200);
    let followed = '';
    const reading = (async () => {
      const dec = new TextDecoder();
      for await (const c of follow.body as any) followed += dec.decode(c, { stream: true });
    })();
    for (let i = 0; i < 300 && !followed.includes(`task ${victim.index} attempt 1 of execution`); i++)
      await sleep(100);
    assert.match(
      followed,
      new RegExp(`^--- attempt 1 ---\ntask ${victim.index} attempt 1 of execution`),
      followed,
    );
    assert.equal((await tasksOf(a, id))[victim.index].status, 'running', 'streamed before the attempt ended');
    // The node's peer route looks the attempt up under its workspace: the cluster's token naming another workspace
    // gets 404; naming the job's own, the stream.
    const holder = cluster.node(victim.node);
    const sandbox = readdirSync(join(holder.dir, 'sandboxes')).find((d) =>
      new RegExp(`^job-[0-9a-f]{12}-${victim.index}-1$`).test(d),
    );
    assert.ok(sandbox, `the attempt's sandbox on ${victim.node}`);
    const headers = { 'x-berth-peer-token': peerToken(Buffer.from(cluster.env.BERTH_MASTER_KEY, 'base64')) };
    const peerLog = (ws: string) => fetch(`${holder.url}/peer/job-tasks/${ws}/${sandbox}/logs`, { headers });
    const other = await peerLog(tenant().home);
    assert.equal(other.status, 404, await other.text());
    const own = await peerLog('default');
    assert.equal(own.status, 200);
    await own.body?.cancel();
    await cluster.kill(victim.node);
    const killedAt = Date.now();
    let again: any;
    for (let i = 0; i < 600; i++) {
      again = (await tasksOf(a, id))[victim.index];
      if (again.attempts >= 2 && again.status === 'running') break;
      await sleep(50);
    }
    const retryMs = Date.now() - killedAt;
    assert.equal(again.attempts, 2, JSON.stringify(again));
    assert.notEqual(again.node, victim.node);
    const e = await ended(a, id);
    const doneMs = Date.now() - killedAt;
    assert.equal(e.status, 'succeeded', JSON.stringify(e));
    const tasks = await tasksOf(a, id);
    const t = tasks[victim.index];
    assert.equal(t.status, 'succeeded');
    const lost = t.conditions.find((c: any) => c.reason === 'lost');
    assert.match(
      lost?.message ?? JSON.stringify(t.conditions),
      new RegExp(
        `^lost: node ${victim.node}, which ran attempt 1, stopped; its process is gone\\. It runs again`,
      ),
    );
    const job = await (await api(a, `/jobs/${JOB}`)).json();
    assert.ok(
      job.events.some((ev: any) => ev.message.startsWith(`lost: node ${victim.node}, which ran task`)),
      JSON.stringify(job.events.slice(-5)),
    );
    // Its log through the other survivor: the lost attempt, then the one that succeeded.
    const via = cluster.procs.find((p) => cluster.alive(p) && p.id !== 'node-a') ?? a;
    const log = await (await api(via, `/jobs/${JOB}/executions/${id}/tasks/${victim.index}/logs`)).text();
    assert.match(
      log,
      new RegExp(
        `--- attempt 1 ---\\n\\(no output: node ${victim.node} stopped[^]*--- attempt 2 ---\\n[^]*MARKER task=${victim.index} attempt=2 done`,
      ),
    );
    await reading;
    assert.match(
      followed,
      new RegExp(
        `--- attempt 2 ---\ntask ${victim.index} attempt 2 of execution[^]*MARKER task=${victim.index} attempt=2 done`,
      ),
      followed,
    );
    process.stdout.write(
      `# kill -9 of ${victim.node} under task ${victim.index}: its retry ran on ${again.node} ${retryMs} ms after the kill, the execution ended ${doneMs} ms after (load ${loadavg()[0].toFixed(1)})\n`,
    );
  });

  it('kill -9 of the leader while tasks run on a follower: they run on, the new leader records them, the execution succeeds, and earlier logs read the same', async () => {
    const f = cluster.procs.find((p) => cluster.alive(p) && p.id !== 'node-a') as Proc;
    const id = await execution(
      f,
      Array.from({ length: 4 }, (_, i) => ({ name: `l${i}`, sleep: 8 })),
    );
    let onF: any[] = [];
    for (let i = 0; i < 600 && !onF.length; i++) {
      onF = (await tasksOf(f, id)).filter((t) => t.status === 'running' && t.node === f.id);
      if (!onF.length) await sleep(100);
    }
    assert.ok(onF.length, `no task ran on ${f.id}`);
    await cluster.kill('node-a');
    const e = await ended(f, id);
    assert.equal(e.status, 'succeeded', JSON.stringify(e));
    const tasks = await tasksOf(f, id);
    for (const t of onF) {
      const now = tasks[t.index];
      assert.equal(now.status, 'succeeded', JSON.stringify(now));
      // Not started again: the attempt on the follower went on through the leader's death, and its end was recorded.
      assert.equal(now.attempts, t.attempts, JSON.stringify(now));
    }
    // The logs of the first execution, whose attempts ended under node-a's lead (their files on its disk only), read
    // the same through the new leader: they were stored with each outcome.
    for (const t of await tasksOf(f, first)) {
      const path = `/jobs/${JOB}/executions/${first}/tasks/${t.index}/logs`;
      const pattern = new RegExp(
        `--- attempt ${t.attempts} ---\\n[^]*MARKER task=${t.index} attempt=${t.attempts} done`,
      );
      assert.match(await (await api(f, path)).text(), pattern, `task ${t.index}'s log after the failover`);
      assert.match(await (await api(f, `${path}?follow=true`)).text(), pattern);
    }
  });
});
