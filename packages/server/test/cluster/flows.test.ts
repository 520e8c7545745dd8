// Three `berth serve` processes on one PostgreSQL (issue 24's "done when", docs/decisions/063-cluster-flows.md):
// through each of them an agent deployed from code answers the unmodified @blaxel/core SDK, an MCP server built from
// its template gives a working session to the official MCP client, a job execution runs its task; another tenant
// reaches none of them through any server; every server keeps a copy of the code. Kill -9 and a database restart are
// in flows-failures.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CodeStore } from '../../src/builds/code-store.js';
import { type Proc, sleep } from './cluster-support.js';
import { AGENT, JOB, MCP, useFlowsCluster } from './flows-support.js';

describe('a cluster of three servers serves the SDK flows through each', () => {
  // No builds ahead here: what they change is tested in flows-failures.test.ts and builds-ahead.test.ts, and six
  // builds more on two cores would double this file's time.
  const {
    cluster,
    tenant: tenantOf,
    sdkAgent,
    execution,
    ended,
  } = useFlowsCluster('flows', [AGENT, MCP, JOB], { BERTH_BUILDS_AHEAD: 'false' });
  const { api, procs } = cluster;

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
      const agent = await cluster.run(p, `agents/${AGENT}`, { inputs: 'x' }, tenantOf().key);
      assert.ok([403, 404].includes(agent.status), `agent through ${p.id}: ${agent.status}`);
      const mcp = await fetch(`${p.url}/run/default/functions/${MCP}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${tenantOf().key}`,
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
          key: tenantOf().key,
          headers,
          json: { tasks: [{}] },
        });
        assert.ok([403, 404].includes(job.status), `job through ${p.id}: ${job.status}`);
        const read = await api(p, `/agents/${AGENT}`, { key: tenantOf().key, headers });
        assert.ok([403, 404].includes(read.status), `agent read through ${p.id}: ${read.status}`);
      }
    }
  });

  it("every server keeps a copy of the agent's code; the peer route gives it to no one without the cluster's token", async () => {
    const digest = (await (await api(procs[0], `/agents/${AGENT}`)).json()).source.digest;
    for (const p of procs) {
      // BERTH_BUILDS_AHEAD=false: the copy is kept, nothing is built ahead of a lead.
      assert.doesNotMatch(await (await fetch(`${p.url}/metrics`)).text(), /berth_builds_ahead_total/, p.id);
      const copies = new CodeStore(p.dir);
      for (let i = 0; i < 100 && !copies.has('default', digest); i++) await sleep(100);
      assert.ok(copies.has('default', digest), `no copy on ${p.id}`);
      for (const headers of [
        {},
        { authorization: `Bearer ${tenantOf().key}` },
        { authorization: `Bearer ${cluster.key}` },
        { 'x-berth-peer-token': 'A'.repeat(43) },
      ] as Record<string, string>[]) {
        const r = await fetch(`${p.url}/peer/code/default/${digest}`, { headers });
        assert.equal(r.status, 404, `${p.id} ${JSON.stringify(headers)}`);
      }
    }
  });
});
