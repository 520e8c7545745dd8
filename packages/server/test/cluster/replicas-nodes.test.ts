// Agents' replicas placed across the nodes of a cluster (docs/decisions/086-replicas-across-nodes.md): an agent with
// minScale 2 has its replica slots on two different nodes (its `replicaNodes`, and each node's `holds` in the node
// list); calls through the third server reach both; kill -9 of a node holding one (a follower, then the leader):
// calls through a survivor go on answering with no failure once the kill is done, and the slot is placed again on a
// live node up to the agent's scale, with a `lost:` event naming the dead node. A second tenant reaches none of the
// replicas, through any server or the peer path. An application is placed the same way: its one slot moves off a
// node killed under it to a live node, which then serves it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FORWARDED_BY } from '../../src/http/peer-forward.js';
import { nodeLayer, savedArchive, toolsLayer } from '../../src/runtime/images/test-support/registry.js';
import { berth } from '../berth-cli.js';
import { type Proc, sleep } from './cluster-support.js';
import { AGENT, useFlowsCluster } from './flows-support.js';

describe('agent replicas placed across the nodes of a cluster', () => {
  const { cluster, tenant, alive } = useFlowsCluster('replicas-nodes', [AGENT]);
  const { api } = cluster;

  const agent = async (p: Proc) => (await api(p, `/agents/${AGENT}`)).json();
  /** One call through `p`: its status and the node whose replica answered. */
  const call = async (p: Proc, word = 'x') => {
    const r = await cluster.run(p, `agents/${AGENT}`, { inputs: word });
    const text = await r.text();
    return { status: r.status, node: r.headers.get('x-berth-node') ?? '', text };
  };
  /** Waits until the agent's slots are on `count` different live nodes, each serving a replica; returns them. */
  const spread = async (p: Proc, count: number, not: string[] = []) => {
    let last: unknown;
    for (let i = 0; i < 900; i++) {
      const o = await agent(p);
      const nodes: string[] = o.replicaNodes ?? [];
      const list = await cluster.nodes(p);
      const holding = nodes.filter((n) =>
        list.some(
          (x) =>
            x.id === n &&
            x.healthy &&
            x.holds.instances > 0 &&
            (x.serving ?? []).includes(`Agent/default/${AGENT}`),
        ),
      );
      last = { status: o.status, nodes, list: list.map((x) => [x.id, x.healthy, x.holds, x.serving]) };
      if (o.status === 'DEPLOYED' && new Set(holding).size === count && !nodes.some((n) => not.includes(n)))
        return nodes;
      await sleep(100);
    }
    assert.fail(`the agent's replicas never spread over ${count} nodes: ${JSON.stringify(last)}`);
  };

  let slots: string[] = [];
  it('places an agent with minScale 2 on two different nodes, and a third server reaches both', async () => {
    const a = cluster.node('node-a');
    const o = await agent(a);
    const r = await api(cluster.node('node-b'), `/agents/${AGENT}`, {
      method: 'PUT',
      json: {
        metadata: { name: AGENT },
        spec: { ...o.spec, runtime: { ...o.spec.runtime, minScale: 2, memory: 256 } },
      },
    });
    assert.equal(r.status, 200, await r.text());
    slots = await spread(a, 2);
    const third = cluster.procs.find((p) => !slots.includes(p.id));
    assert.ok(third, JSON.stringify(slots));
    const seen = new Set<string>();
    // The third server learns that a node serves it from that node's heartbeat, read every 500 ms: until then it
    // sends every call to the nodes it knows serve it.
    let calls = 0;
    for (let i = 0; i < 300 && seen.size < 2; i++) {
      calls++;
      const c = await call(third, `w${i}`);
      assert.equal(c.status, 200, c.text);
      assert.equal(JSON.parse(c.text).output, `W${i}`);
      seen.add(c.node);
      await sleep(50);
    }
    process.stdout.write(`# both nodes answered within ${calls} calls through ${third.id}\n`);
    assert.deepEqual([...seen].sort(), [...new Set(slots)].sort());
  });

  it('a second tenant reaches none of the replicas, through any server or the peer path', async () => {
    const t = tenant();
    for (const p of cluster.procs) {
      // Its own workspace has no such agent; the first one's it may not call.
      const own = await fetch(`${p.url}/run/${t.home}/agents/${AGENT}`, {
        method: 'POST',
        headers: { 'x-blaxel-authorization': `Bearer ${t.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: 'x' }),
      });
      assert.equal(own.status, 404, await own.text());
      const other = await cluster.run(p, `agents/${AGENT}`, { inputs: 'x' }, t.key);
      assert.ok([401, 403, 404].includes(other.status), `${other.status} ${await other.text()}`);
      // As if sent on by a peer: the node judges the credential itself.
      const peer = await fetch(`${p.url}/run/default/agents/${AGENT}`, {
        method: 'POST',
        headers: {
          'x-blaxel-authorization': `Bearer ${t.key}`,
          'content-type': 'application/json',
          [FORWARDED_BY]: 'node-x',
        },
        body: JSON.stringify({ inputs: 'x' }),
      });
      assert.ok([401, 403, 404].includes(peer.status), `${peer.status} ${await peer.text()}`);
    }
  });

  /**
   * Calls through `via` in a loop while `victim` is killed: every call that started after the kill returned is
   * answered (one in flight at the kill may fail, as the docs say); then the slot moves to a live node.
   */
  const survives = async (victim: string) => {
    const via =
      alive().find((p) => p.id !== victim && !slots.includes(p.id)) ?? alive().find((p) => p.id !== victim);
    assert.ok(via);
    let killedAt = Number.POSITIVE_INFINITY;
    let calling = true;
    const after: { status: number; node: string; text: string; at: number }[] = [];
    const loop = (async () => {
      for (let i = 0; calling; i++) {
        const started = Date.now();
        const c = await call(via, `k${i}`).catch((e) => ({ status: 0, node: '', text: String(e) }));
        if (started > killedAt) after.push({ ...c, at: started - killedAt });
        await sleep(50);
      }
    })();
    await sleep(500);
    await cluster.kill(victim);
    killedAt = Date.now();
    await sleep(4_000);
    calling = false;
    await loop;
    const failed = after.filter((c) => c.status !== 200);
    assert.equal(failed.length, 0, JSON.stringify(failed.slice(0, 3)));
    assert.ok(after.length > 10, `only ${after.length} calls after the kill`);
    assert.ok(!after.some((c) => c.node === victim), JSON.stringify(after.filter((c) => c.node === victim)));
    // Re-created on a live node up to its scale, the dead node named.
    slots = await spread(via, 2, [victim]);
    const o = await agent(via);
    assert.ok(
      (o.events ?? []).some((e: any) =>
        String(e.message).startsWith(`lost: node ${victim}, which ran a replica`),
      ),
      JSON.stringify(o.events?.slice(-4)),
    );
    return via;
  };

  let follower = '';
  it('kill -9 of a follower holding a replica: calls through a survivor keep answering; the replica is re-created elsewhere', async () => {
    const leader = (await cluster.nodes(cluster.node('node-a'))).find((n) => n.leads.length)?.id;
    const victim = slots.find((n) => n !== leader);
    assert.ok(victim, JSON.stringify(slots));
    follower = victim;
    await survives(victim);
  });

  it('kill -9 of the leader holding a replica: the same', async () => {
    // The follower back (it removes what it ran: its slot is elsewhere now), so that two nodes survive the leader.
    await cluster.start(follower);
    const survivors = alive();
    const leader = (await cluster.nodes(survivors[0])).find((n) => n.leads.length && n.healthy)?.id;
    assert.ok(leader);
    if (!slots.includes(leader))
      return void assert.fail(`the leader holds no slot: ${JSON.stringify(slots)}`);
    const via = await survives(leader);
    const c = await call(via, 'end');
    assert.equal(c.status, 200, c.text);
  });

  it('berth node drain --wait of a follower holding a replica returns once its replicas moved; calls go on', async () => {
    const via = alive()[0];
    const leader = (await cluster.nodes(via)).find((n) => n.leads.length && n.healthy)?.id;
    const drained = slots.find((n) => n !== leader);
    assert.ok(drained, JSON.stringify({ slots, leader }));
    const lost = (o: any) =>
      (o.events ?? []).filter((e: any) => String(e.message).startsWith(`lost: node ${drained}`)).length;
    const lostBefore = lost(await agent(via));
    const d = await berth({ url: via.url, adminKey: cluster.key }, [
      'node',
      'drain',
      drained,
      '--wait',
      '--timeout',
      '60',
    ]);
    assert.equal(d.code, 0, `${d.stdout}${d.stderr}`);
    assert.match(d.stdout, new RegExp(`node ${drained} holds nothing`));
    const o = await agent(via);
    assert.ok(!(o.replicaNodes ?? []).includes(drained), JSON.stringify(o.replicaNodes));
    for (let i = 0; i < 5; i++) {
      const c = await call(cluster.node(drained), `d${i}`);
      assert.equal(c.status, 200, c.text);
      assert.notEqual(c.node, drained);
    }
    // No `lost:` event for a drain: nothing was lost.
    assert.equal(lost(await agent(via)), lostBefore);
  });

  it('an application is placed like an agent: killed under it, its slot moves to a live node, which serves it', async () => {
    // Every server back and undrained: nodes to place on.
    for (const id of ['node-a', 'node-b', 'node-c'])
      if (!alive().some((p) => p.id === id)) await cluster.start(id);
    const via0 = alive()[0];
    for (const n of await cluster.nodes(via0))
      if (n.drained) {
        const u = await berth({ url: via0.url, adminKey: cluster.key }, ['node', 'undrain', n.id]);
        assert.equal(u.code, 0, u.out);
      }
    const { archive } = await savedArchive(
      [await toolsLayer('app-nodes'), await nodeLayer()],
      ['local/web:1'],
      {
        Env: ['PATH=/opt/node/bin:/bin'],
        Cmd: ['node', '-e', WEB],
      },
    );
    const imported = await api(via0, '/images/import', {
      method: 'POST',
      body: new Uint8Array(archive),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(imported.status, 200, await imported.text());
    const created = await api(via0, '/applications', {
      method: 'POST',
      json: { metadata: { name: 'web' }, spec: { image: 'local/web:1', port: 3000, memory: 256 } },
    });
    assert.equal(created.status, 200, await created.text());
    const app = async (p: Proc) => (await api(p, '/applications/web')).json();
    const get = async (p: Proc) => {
      const r = await fetch(`${p.url}/run/default/applications/web/`).catch(() => undefined);
      const text = (await r?.text()) ?? '';
      return { status: r?.status ?? 0, node: r?.headers.get('x-berth-node') ?? '', text };
    };
    /** Waits until the application's one slot is on a live node other than `not`, which answers for it. */
    const servedOn = async (not?: string) => {
      let last: unknown;
      for (let i = 0; i < 900; i++) {
        const via = alive().find((p) => p.id !== not) as Proc;
        const o = await app(via);
        const nodes: string[] = o.replicaNodes ?? [];
        const c = await get(via);
        last = { status: o.status, nodes, call: c };
        if (
          o.status === 'DEPLOYED' &&
          nodes.length === 1 &&
          nodes[0] !== not &&
          c.status === 200 &&
          c.node === nodes[0]
        )
          return nodes[0];
        await sleep(100);
      }
      assert.fail(`the application was never served from its slot: ${JSON.stringify(last)}`);
    };
    const holder = await servedOn();
    // Through every server, from the node holding its slot.
    for (const p of alive()) {
      const c = await get(p);
      assert.equal(c.status, 200, c.text);
      assert.equal(c.node, holder);
    }
    await cluster.kill(holder);
    const next = await servedOn(holder);
    assert.notEqual(next, holder);
    const o = await app(alive()[0]);
    assert.ok(
      (o.events ?? []).some((e: any) =>
        String(e.message).startsWith(`lost: node ${holder}, which ran a replica of this application`),
      ),
      JSON.stringify(o.events?.slice(-4)),
    );
  });
});

/** An application's server: it answers on the port its spec names. */
const WEB = `require('node:http').createServer((q, r) => r.end('web')).listen(3000, '0.0.0.0');`;
