// Three `berth serve` processes on one PostgreSQL (issue 24's "done when", docs/decisions/063-cluster-flows.md):
// through each of them an agent deployed from code answers the unmodified @blaxel/core SDK, an MCP server built from
// its template gives a working session to the official MCP client, a job execution runs its task; another tenant
// reaches none of them through any server. Then kill -9 of a follower and of the leader under writes and agent calls:
// no acknowledged write lost, the agent answers again, the task running on the dead leader runs again and its
// execution ends, the dead nodes turn unhealthy. Then the database restarted under writes.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CodeStore } from '../../src/builds/code-store.js';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { seedNodeCache } from '../../src/test-support/dependency-cache.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const REPO = join(import.meta.dirname, '../../../..');
const TEMPLATES = join(REPO, 'templates');
const SDK_SCRIPT = join(import.meta.dirname, '../agents/blaxel-workloads.mjs');
const AGENT = 'agent-python';
const MCP = 'mcp-typescript';
const JOB = 'job-typescript';

describe('a cluster of three servers serves the SDK flows through each, and survives kill -9', () => {
  const cluster = useCluster(['node-a', 'node-b', 'node-c'], { prefix: 'flows' });
  const { api, procs } = cluster;
  let work: string;
  let tenant: Tenant;
  const alive = () => procs.filter((p) => cluster.alive(p));

  /** The agent's answer to the SDK's blAgent(name).run() through `p`. */
  const sdkAgent = async (p: Proc, key = cluster.key) => {
    const stdout = await runBlaxelScript(SDK_SCRIPT, { url: p.url, adminKey: key }, { AGENT_NAME: AGENT });
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    const res = JSON.parse(line.slice('RESULT '.length)).agent;
    return typeof res === 'string' ? JSON.parse(res) : res;
  };
  const execution = async (p: Proc, tasks: unknown[]) => {
    const r = await api(p, `/jobs/${JOB}/executions`, { method: 'POST', json: { tasks } });
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    return body.executionId as string;
  };
  const ended = async (p: Proc, id: string, polls = 600) => {
    let e: any;
    for (let i = 0; i < polls; i++) {
      const r = await api(p, `/jobs/${JOB}/executions/${id}`);
      if (r.status === 200) {
        e = await r.json();
        if (['succeeded', 'failed', 'cancelled'].includes(e.status)) return e;
      }
      await sleep(200);
    }
    assert.fail(`execution ${id} never ended: ${JSON.stringify(e)}`);
  };
  const deploy = async (p: Proc, template: string) => {
    const dir = join(work, template);
    cpSync(join(TEMPLATES, template), dir, { recursive: true });
    // Builds run on the leader; any server may lead after a failover, so each has the dependency cache a build
    // with network would have filled.
    if (template !== AGENT) for (const q of procs) seedNodeCache(q.dir, 'default', dir, REPO);
    const r = await berth({ url: p.url, adminKey: cluster.key }, ['deploy', dir]);
    assert.equal(r.code, 0, r.out);
  };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'berth-flows-'));
    tenant = await newTenant(cluster.server(cluster.node('node-a')), 'tenant-flows');
    // Each deployed through a different server: followers send the upload on to the leader.
    await Promise.all([
      deploy(cluster.node('node-b'), AGENT),
      deploy(cluster.node('node-c'), MCP),
      deploy(cluster.node('node-a'), JOB),
    ]);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('an agent deployed from code answers the unmodified SDK through each server', async () => {
    for (const p of procs) assert.equal((await sdkAgent(p)).output, 'FROM THE SDK', p.id);
  });

  it('an MCP server from its template gives a working session through each server', async () => {
    for (const p of procs) {
      const client = new Client({ name: 'test', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${p.url}/run/default/functions/${MCP}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${cluster.key}` } },
        }),
      );
      const tools = await client.listTools();
      assert.deepEqual(
        tools.tools.map((t) => t.name),
        ['text_stats'],
        p.id,
      );
      const called = await client.callTool({ name: 'text_stats', arguments: { text: `via ${p.id}` } });
      assert.deepEqual(called.structuredContent, { characters: 10, words: 2, lines: 1 }, p.id);
      await client.close();
    }
  });

  it('a job execution created through each server runs its task to success', async () => {
    const ids = new Map<Proc, string>();
    for (const p of procs) ids.set(p, await execution(p, [{ name: p.id }]));
    for (const [p, id] of ids) {
      const e = await ended(p, id);
      assert.equal(e.status, 'succeeded', JSON.stringify(e));
      const log = await (await api(p, `/jobs/${JOB}/executions/${id}/tasks/0/logs`)).text();
      assert.match(log, new RegExp(`hello, ${p.id}`));
    }
  });

  it("another tenant reaches neither the first one's agent, MCP server nor job through any server", async () => {
    for (const p of procs) {
      const agent = await cluster.run(p, `agents/${AGENT}`, { inputs: 'x' }, tenant.key);
      assert.ok([403, 404].includes(agent.status), `agent through ${p.id}: ${agent.status}`);
      const mcp = await fetch(`${p.url}/run/default/functions/${MCP}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${tenant.key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      assert.ok([403, 404].includes(mcp.status), `MCP through ${p.id}: ${mcp.status}`);
      // In its own workspace the names are its own (none); naming the first one's workspace, it is refused.
      for (const headers of [{}, { 'x-service-workspace': 'default' }] as Record<string, string>[]) {
        const job = await api(p, `/jobs/${JOB}/executions`, {
          method: 'POST',
          key: tenant.key,
          headers,
          json: { tasks: [{}] },
        });
        assert.ok([403, 404].includes(job.status), `job through ${p.id}: ${job.status}`);
        const read = await api(p, `/agents/${AGENT}`, { key: tenant.key, headers });
        assert.ok([403, 404].includes(read.status), `agent read through ${p.id}: ${read.status}`);
      }
    }
  });

  it("every server keeps a copy of the agent's code; the peer route gives it to no one without the cluster's token", async () => {
    const digest = (await (await api(procs[0], `/agents/${AGENT}`)).json()).source.digest;
    for (const p of procs) {
      const copies = new CodeStore(p.dir);
      for (let i = 0; i < 100 && !copies.has('default', digest); i++) await sleep(100);
      assert.ok(copies.has('default', digest), `no copy on ${p.id}`);
      for (const headers of [
        {},
        { authorization: `Bearer ${tenant.key}` },
        { authorization: `Bearer ${cluster.key}` },
        { 'x-berth-peer-token': 'A'.repeat(43) },
      ] as Record<string, string>[]) {
        const r = await fetch(`${p.url}/peer/code/default/${digest}`, { headers });
        assert.equal(r.status, 404, `${p.id} ${JSON.stringify(headers)}`);
      }
    }
  });

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
    // A task running on the leader when it dies.
    const long = await execution(c, [{ name: 'long', sleep: 8 }]);
    for (let i = 0; i < 300; i++) {
      const tasks = await (await api(c, `/jobs/${JOB}/executions/${long}/tasks`)).json();
      if (tasks[0]?.status === 'running') break;
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
    try {
      await load.more(20);
      await cluster.kill('node-b');
      await load.more(20);
      await cluster.kill('node-a');
      const killedAt = Date.now();
      for (let i = 0; i < 200 && !(await cluster.nodes(c)).find((n) => n.id === 'node-c')?.leads.length; i++)
        await sleep(100);
      tookOver = Date.now() - killedAt;
      assert.deepEqual((await cluster.nodes(c)).find((n) => n.id === 'node-c')?.leads, ['controllers']);
      await load.more(20);
      await agentAnswers(c);
      answered = Date.now() - killedAt;
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
    // The task that ran on the dead leader runs again on the new one (not counted as a retry) and its execution ends.
    const e = await ended(c, long);
    assert.equal(e.status, 'succeeded', JSON.stringify(e));
    // Lost once, then run once the new leader had built the app: no attempt spent on an app not built there yet.
    const [task] = await (await api(c, `/jobs/${JOB}/executions/${long}/tasks`)).json();
    assert.deepEqual(
      task.conditions.map((x: any) => x.reason).filter((r: string) => r !== 'succeeded'),
      ['lost'],
      JSON.stringify(task.conditions),
    );
    assert.equal(task.attempts, 2, JSON.stringify(task));
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
        exits.push(`${p.id} ${code ?? signal}`);
        if (code !== 75)
          process.stdout.write(`# ${p.id} exited ${code ?? signal}:\n${p.stderr().replace(/^/gm, '# ')}\n`);
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
