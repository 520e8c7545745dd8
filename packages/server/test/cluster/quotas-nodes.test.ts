// Counts over the nodes of a cluster (docs/decisions/092-cluster-wide-counts.md), three `berth serve` on one
// PostgreSQL with a replicas quota of 3: an agent with minScale 2 on two nodes is counted and listed with both
// replicas (and their nodes) through every server; a function asking for two more replicas gets one at most, so the
// workspace never runs more than 3 across the nodes, and the workspace's quota view counts every node's; a second
// tenant's view counts none of it; a spec change whose start fails on the nodes holding the agent's replicas is
// recorded on the agent by each node (a follower among them), while the replicas they ran keep answering.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Proc, sleep } from './cluster-support.js';
import { AGENT, MCP, useFlowsCluster } from './flows-support.js';

const QUOTA = 3;

describe('workspace quotas and replica counts over the nodes of a cluster', () => {
  const { cluster, tenant } = useFlowsCluster('quotas-nodes', [AGENT, MCP], {
    BERTH_QUOTA_REPLICAS: String(QUOTA),
  });
  const { api } = cluster;

  const get = async (p: Proc, path: string, key?: string) => {
    const r = await api(p, path, key ? { key } : {});
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    return body;
  };
  const put = async (p: Proc, path: string, name: string, change: (spec: any) => any) => {
    const o = await get(p, path);
    const r = await api(p, path, { method: 'PUT', json: { metadata: { name }, spec: change(o.spec) } });
    assert.equal(r.status, 200, await r.text());
  };
  const listed = async (p: Proc, plural: string, name: string) =>
    (await get(p, `/${plural}/${name}/replicas`)) as { id: string; node?: string; standbyUntil?: string }[];
  const serving = <R extends { standbyUntil?: string }>(list: R[]) =>
    list.filter((r) => r.standbyUntil === undefined);

  /** What the last poll of `until` saw, printed when it gives up. */
  let seen: unknown;
  async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
    const end = Date.now() + ms;
    seen = undefined;
    while (Date.now() < end) {
      try {
        const v = await f();
        if (v !== undefined) return v;
      } catch (err) {
        seen = String(err);
      }
      await sleep(100);
    }
    assert.fail(`${what} never happened: ${JSON.stringify(seen)}`);
  }

  let agentNodes: string[] = [];
  it("an agent's replicas on two nodes are counted and listed, with their nodes, through every server", async () => {
    const a = cluster.node('node-a');
    await put(cluster.node('node-b'), `/agents/${AGENT}`, AGENT, (spec) => ({
      ...spec,
      runtime: { ...spec.runtime, minScale: 2, memory: 256 },
    }));
    agentNodes = await until('two nodes serving the agent', async () => {
      const o = await get(a, `/agents/${AGENT}`);
      const nodes: string[] = o.replicaNodes ?? [];
      const list = serving(await listed(a, 'agents', AGENT));
      const on = new Set(list.map((r) => r.node));
      return o.status === 'DEPLOYED' && new Set(nodes).size === 2 && nodes.every((n) => on.has(n))
        ? nodes
        : undefined;
    });
    for (const p of cluster.procs) {
      await until(`${p.id} counting both replicas`, async () => {
        const o = await get(p, `/agents/${AGENT}`);
        const list = serving(await listed(p, 'agents', AGENT));
        const nodes = new Set(list.map((r) => r.node));
        return o.replicas >= 2 && agentNodes.every((n) => nodes.has(n)) ? true : undefined;
      });
    }
  });

  it(`a workspace with a replicas quota of ${QUOTA} never runs more across the nodes; another tenant's view is its own`, async () => {
    const a = cluster.node('node-a');
    await put(cluster.node('node-c'), `/functions/${MCP}`, MCP, (spec) => ({
      ...spec,
      runtime: { ...spec.runtime, minScale: 2, memory: 256 },
    }));
    await until('the function placed on two nodes', async () => {
      const o = await get(a, `/functions/${MCP}`);
      seen = { status: o.status, replicaNodes: o.replicaNodes };
      return new Set(o.replicaNodes ?? []).size === 2 ? true : undefined;
    });
    // Each node sees room for its share alone (the agent's one, the function's one): counted per node, the workspace
    // would run 4. For 8 s, it never runs more than its quota.
    let most = 0;
    const end = Date.now() + 8_000;
    while (Date.now() < end) {
      const total =
        serving(await listed(a, 'agents', AGENT)).length + serving(await listed(a, 'functions', MCP)).length;
      most = Math.max(most, total);
      await sleep(200);
    }
    process.stdout.write(`# most replicas of the workspace seen at once across the nodes: ${most}\n`);
    assert.ok(most <= QUOTA, `the workspace ran ${most} replicas, over its quota of ${QUOTA}`);
    await until(
      'a replicas quota event on the function',
      async () => {
        const fn = await get(a, `/functions/${MCP}`);
        seen = fn.events?.slice(-5);
        return (fn.events ?? []).some((e: any) => /replicas quota/.test(String(e.message)))
          ? true
          : undefined;
      },
      20_000,
    );
    // The quota view (answered by the leader) counts every node's replicas, standby ones among them.
    const q = await until(
      'the quota view counting every node',
      async () => {
        const v = await get(a, '/quotas');
        const all = (await listed(a, 'agents', AGENT)).length + (await listed(a, 'functions', MCP)).length;
        seen = { used: v.quotas.replicas.used, all };
        return v.quotas.replicas.used === all && all >= 2 ? v : undefined;
      },
      20_000,
    );
    assert.equal(q.quotas.replicas.limit, QUOTA);
    // The second tenant: none of it counts against its own quota, and it sees none of the first one's replicas.
    const t = tenant();
    for (const p of cluster.procs) {
      const v = await get(p, '/quotas', t.key);
      assert.equal(v.quotas.replicas.used, 0, JSON.stringify(v));
      const r = await api(p, `/agents/${AGENT}/replicas`, { key: t.key });
      assert.equal(r.status, 404, await r.text());
    }
  });

  it("a spec change whose start fails on a follower holding the agent's replicas is recorded on the agent by that node", async () => {
    const a = cluster.node('node-a');
    const leader = (await cluster.nodes(a)).find((n) => n.leads.length && n.healthy)?.id;
    const placed = ((await get(a, `/agents/${AGENT}`)).replicaNodes ?? []) as string[];
    const followers = placed.filter((n) => n !== leader);
    assert.ok(followers.length > 0, JSON.stringify({ leader, placed }));
    const said = (o: any, n: string, text: string) =>
      (o.events ?? []).filter((e: any) => String(e.message).startsWith(text.replace('<n>', n))).length;
    const failed = 'node <n> could not start the replicas placed on it';
    // An interpreter that cannot start: the followers' blue-green start fails (the leader's deploy fails it too, and
    // the object goes FAILED with the output).
    await put(a, `/agents/${AGENT}`, AGENT, (spec) => ({
      ...spec,
      runtime: { ...spec.runtime, envs: [{ name: 'PYTHONHOME', value: '/nonexistent' }] },
    }));
    const reported = await until('each follower holding the agent reporting its failed start', async () => {
      const o = await get(a, `/agents/${AGENT}`);
      seen = {
        status: o.status,
        leader,
        placed,
        events: (o.events ?? []).slice(-6).map((e: any) => String(e.message).slice(0, 200)),
      };
      // The first try may be refused by the quota (the leader's own try of the spec holds a replica meanwhile, and
      // this node's blue-green needs one more); the start itself fails next.
      const started = (n: string) =>
        (o.events ?? []).some(
          (e: any) =>
            String(e.message).startsWith(failed.replace('<n>', n)) && /exited with code/.test(e.message),
        );
      return followers.every(started) ? o : undefined;
    });
    process.stdout.write(`# failed start reported by ${followers.join(', ')} (leader ${leader})\n`);
    // Said once per cause, not at each retry of the backoff.
    const before = Object.fromEntries(followers.map((n) => [n, said(reported, n, failed)]));
    await sleep(6_000);
    const later = await get(a, `/agents/${AGENT}`);
    for (const n of followers)
      assert.ok(said(later, n, failed) <= before[n] + 1, JSON.stringify(later.events?.slice(-6)));
    // Put right, each follower says its replicas run again, and the agent answers through every server.
    await put(a, `/agents/${AGENT}`, AGENT, (spec) => ({ ...spec, runtime: { ...spec.runtime, envs: [] } }));
    await until('each follower saying its replicas run again', async () => {
      const o = await get(a, `/agents/${AGENT}`);
      seen = {
        status: o.status,
        events: (o.events ?? []).slice(-6).map((e: any) => String(e.message).slice(0, 200)),
      };
      return o.status === 'DEPLOYED' &&
        followers.every((n) => said(o, n, 'node <n>: the replicas placed on it run again') > 0)
        ? true
        : undefined;
    });
    for (const p of cluster.procs) {
      const r = await cluster.run(p, `agents/${AGENT}`, { inputs: 'again' });
      assert.equal(r.status, 200, await r.text());
    }
  });
});
