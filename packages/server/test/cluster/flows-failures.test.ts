// Three `berth serve` on one PostgreSQL under failures (decision 063): kill -9 of a follower and of the leader under
// writes and agent calls (no acknowledged write lost, the agent answers again, a task running on a dead node
// runs again and its execution ends, the dead nodes turn unhealthy); then the database restarted under writes. The
// flows through each server are in flows.test.ts.
import assert from 'node:assert/strict';
import { loadavg } from 'node:os';
import { describe, it } from 'node:test';
import { type Proc, sleep } from './cluster-support.js';
import { AGENT, JOB, useFlowsCluster } from './flows-support.js';

describe('a cluster of three servers survives kill -9 and a database restart', () => {
  const { cluster, alive, sdkAgent, execution, ended } = useFlowsCluster('flows-fail', [AGENT, JOB]);
  const { api, procs } = cluster;

  /**
   * Writes through the live servers until stopped, each writer on names of its own (so the order of its writes is the
   * order they were acknowledged in): replaces of a few policies and creates of new ones. Records the last value
   * acknowledged (2xx) per name and the values sent since that got no acknowledgement (they may or may not have
   * landed, as with any database).
   */
  const writeLoad = (label: string, writers = 3) => {
    const acked = new Map<string, number>();
    const unsure = new Map<string, number[]>();
    let count = 0;
    let stop = false;
    const one = async (w: number) => {
      for (let n = 1; !stop; n++) {
        const targets = alive();
        const p = targets[n % targets.length];
        const name = n % 3 === 0 ? `${label}-w${w}-new-${n}` : `${label}-w${w}-${n % 3}`;
        const json = { metadata: { name }, spec: { type: 'maxToken', maxTokens: { output: n } } };
        try {
          const r = await api(p, `/policies/${name}`, {
            method: 'PUT',
            json,
            signal: AbortSignal.timeout(10_000),
          });
          await r.arrayBuffer();
          if (r.ok) {
            acked.set(name, n);
            unsure.delete(name);
            count++;
            continue;
          }
        } catch {
          // Refused connection (a killed server) or no answer: not acknowledged.
        }
        unsure.set(name, [...(unsure.get(name) ?? []), n]);
        await sleep(50);
      }
    };
    const running = Promise.all(Array.from({ length: writers }, (_, w) => one(w)));
    return {
      acked,
      get count() {
        return count;
      },
      /** Resolves once `more` writes beyond the count now were acknowledged. */
      async more(more: number) {
        const until = count + more;
        for (let i = 0; i < 1200 && count < until; i++) await sleep(100);
        assert.ok(count >= until, `only ${count} writes acknowledged, waiting for ${until}`);
      },
      async stop() {
        stop = true;
        await running;
      },
      /** Every acknowledged write is there through `p`, with its last acknowledged value or a later one sent. */
      async check(p: Proc) {
        assert.ok(acked.size > 0);
        for (const [name, n] of acked) {
          const r = await api(p, `/policies/${name}`);
          const body = await r.json();
          assert.equal(r.status, 200, `${name}: ${JSON.stringify(body)}`);
          const allowed = [n, ...(unsure.get(name) ?? [])];
          assert.ok(
            allowed.includes(body.spec.maxTokens.output),
            `${name}: ${body.spec.maxTokens.output} not in ${allowed}`,
          );
        }
      },
    };
  };

  /** Polls the agent through `p` until it answers; returns how long that took. */
  const agentAnswers = async (p: Proc, limitMs = 60_000) => {
    const t0 = Date.now();
    let last = '';
    while (Date.now() - t0 < limitMs) {
      const r = await cluster.run(p, `agents/${AGENT}`, { inputs: 'again' }).catch((e) => e as Error);
      if (r instanceof Response) {
        last = `${r.status} ${await r.text()}`;
        if (r.status === 200 && JSON.parse(last.slice(4)).output === 'AGAIN') return Date.now() - t0;
      } else last = r.message;
      await sleep(250);
    }
    const o = await (await api(p, `/agents/${AGENT}`)).json();
    assert.fail(
      `the agent did not answer through ${p.id} again: ${last}; ${o.status} ${JSON.stringify(o.events?.slice(-3))}`,
    );
  };

  it('kill -9 of a follower, then of the leader, under writes and agent calls: nothing acknowledged is lost', async () => {
    const c = cluster.node('node-c');
    assert.deepEqual((await cluster.nodes(c)).find((n) => n.leads.length)?.id, 'node-a');
    // A task running when the servers die, on whichever node it was placed (decision 093).
    const long = await execution(c, [{ name: 'long', sleep: 8 }]);
    let ranOn = '';
    for (let i = 0; i < 300; i++) {
      const tasks = await (await api(c, `/jobs/${JOB}/executions/${long}/tasks`)).json();
      if (tasks[0]?.status === 'running') {
        ranOn = tasks[0].node;
        break;
      }
      assert.ok(i < 299, JSON.stringify(tasks));
      await sleep(100);
    }
    const load = writeLoad('kill');
    let calling = true;
    const calls = { ok: 0, failed: 0 };
    const caller = (async () => {
      for (let n = 0; calling; n++) {
        const targets = alive();
        const r = await cluster
          .run(targets[n % targets.length], `agents/${AGENT}`, { inputs: 'x' })
          .catch(() => undefined);
        await r?.arrayBuffer();
        if (r?.ok) calls.ok++;
        else calls.failed++;
        await sleep(100);
      }
    })();
    let tookOver = 0;
    let answered = 0;
    const killedAt: Record<string, number> = {};
    try {
      await load.more(20);
      await cluster.kill('node-b');
      killedAt['node-b'] = Date.now();
      await load.more(20);
      await cluster.kill('node-a');
      const leaderKilledAt = Date.now();
      killedAt['node-a'] = leaderKilledAt;
      for (let i = 0; i < 200 && !(await cluster.nodes(c)).find((n) => n.id === 'node-c')?.leads.length; i++)
        await sleep(100);
      tookOver = Date.now() - leaderKilledAt;
      assert.deepEqual((await cluster.nodes(c)).find((n) => n.id === 'node-c')?.leads, ['controllers']);
      await load.more(20);
      await agentAnswers(c);
      answered = Date.now() - leaderKilledAt;
    } finally {
      calling = false;
      await caller;
      await load.stop();
    }
    const figures = `node-c led after ${tookOver} ms, the agent answered again after ${answered} ms`;
    const counts = `${load.count} writes acknowledged, agent calls ${calls.ok} ok / ${calls.failed} failed`;
    process.stdout.write(
      `# kill -9 of the leader: ${figures} (load ${loadavg()[0].toFixed(1)}); ${counts}\n`,
    );
    await load.check(c);
    assert.equal((await sdkAgent(c)).output, 'FROM THE SDK');
    // A task that ran on a killed node fails there and runs again on a live one (a retry: the job's maxRetries is 2),
    // and its execution ends; one that ran on node-c ran once.
    const e = await ended(c, long);
    assert.equal(e.status, 'succeeded', JSON.stringify(e));
    const [task] = await (await api(c, `/jobs/${JOB}/executions/${long}/tasks`)).json();
    // (Its retry placed on node-a before that one was killed too is lost a second time.)
    const lost = task.conditions.map((x: any) => x.reason).filter((r: string) => r !== 'succeeded');
    assert.ok(
      lost.every((r: string) => r === 'lost'),
      JSON.stringify(task.conditions),
    );
    // Lost only where it ran on a killed node and had not ended before the kill (a loaded host may take the load's
    // writes longer than the task's 8 s).
    const endedBeforeKill =
      lost.length === 0 && Date.parse(task.metadata.completedAt) <= (killedAt[ranOn] ?? 0);
    assert.equal(
      lost.length > 0,
      ranOn !== 'node-c' && !endedBeforeKill,
      `${ranOn}: ${JSON.stringify(task.conditions)}`,
    );
    assert.equal(task.attempts, lost.length + 1, JSON.stringify(task));
    let list = await cluster.nodes(c);
    for (let i = 0; i < 100 && list.some((n) => n.id !== 'node-c' && n.healthy); i++) {
      await sleep(100);
      list = await cluster.nodes(c);
    }
    assert.deepEqual(
      list.map((n) => [n.id, n.healthy]),
      [
        ['node-a', false],
        ['node-b', false],
        ['node-c', true],
      ],
    );
  });

  it('the database restarted under writes: the servers reconnect, nothing acknowledged is lost, writes go on', async () => {
    // The killed servers come back, as their supervisor starts them again.
    await Promise.all(['node-a', 'node-b'].map((id) => cluster.start(id)));
    // The test is the supervisor from here on (systemd's Restart=always, docs/cluster.md): a server that exits is
    // started again. By design the leader exits (75) when its database session fails.
    const exits: string[] = [];
    let supervising = true;
    const supervise = (p: Proc) =>
      p.child.once('exit', async (code, signal) => {
        if (!supervising) return;
        // A failure's stderr is printed by the cluster helper (cluster-support.ts).
        exits.push(`${p.id} ${code ?? signal}`);
        for (let i = 0; i < 60 && supervising; i++) {
          try {
            supervise(await cluster.start(p.id));
            return;
          } catch {
            await sleep(1000);
          }
        }
      });
    for (const p of procs) supervise(p);
    const load = writeLoad('db');
    try {
      await load.more(20);
      const leader = (await cluster.nodes(cluster.node('node-a'))).find((n) => n.leads.length)?.id;
      await cluster.pg.restart();
      // The leader's session ended with the restart: it exits (75) once it notices, and is started again.
      for (let i = 0; i < 300 && !exits.length; i++) await sleep(100);
      assert.deepEqual(exits, [`${leader} 75`], 'the leader exits when its database session fails');
      await load.more(30);
      // Every server serves again and one of them leads.
      let list: any[] = [];
      for (let i = 0; i < 300; i++) {
        list = alive().length === 3 ? await cluster.nodes(cluster.node('node-a')).catch(() => []) : [];
        if (list.filter((n) => n.healthy).length === 3 && list.some((n) => n.leads.length)) break;
        await sleep(100);
      }
      await load.more(10);
      await load.stop();
      assert.deepEqual(
        list.map((n) => [n.id, n.healthy]),
        [
          ['node-a', true],
          ['node-b', true],
          ['node-c', true],
        ],
      );
      assert.ok(
        exits.every((e) => e === `${leader} 75`),
        `only the leader (${leader}) exits, with 75: ${exits}`,
      );
      for (const p of procs) await load.check(p);
      for (const p of procs) await agentAnswers(p);
      process.stdout.write(
        `# database restart: ${load.count} writes acknowledged; exits: ${exits.join(', ')}\n`,
      );
    } finally {
      await load.stop();
      // The after hook's SIGTERMs are not to be answered with a restart.
      supervising = false;
    }
  });
});
