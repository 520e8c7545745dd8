// Fencing (docs/decisions/064-cluster-fencing.md): three `berth serve` processes on one PostgreSQL. A node that stalls
// past its lease (SIGSTOP, as a long pause or a cut to the database that heals) loses its sandboxes to the other
// nodes; when it resumes it neither serves nor writes for them (their status, node and events stay the new node's),
// removes its copies, registers again with a higher epoch, and takes new sandboxes again.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TEST_MEMORY_MB } from '../sandboxes/support.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const IDS = ['node-a', 'node-b', 'node-c'];

describe('a node that stalled past its lease is fenced off from the sandboxes placed elsewhere meanwhile', () => {
  // No standby during the test: a sandbox's run state then changes only by a write someone makes.
  const cluster = useCluster(IDS, { prefix: 'fence', env: { BERTH_STANDBY_AFTER: '600' } });
  const a = () => cluster.node('node-a');
  const get = async (p: Proc, name: string) => (await cluster.api(p, `/sandboxes/${name}`)).json();
  const create = async (name: string) => {
    const r = await cluster.api(a(), '/sandboxes', {
      method: 'POST',
      json: { metadata: { name }, spec: { runtime: { memory: TEST_MEMORY_MB } } },
    });
    const sb = await r.json();
    assert.equal(r.status, 200, JSON.stringify(sb));
    assert.equal(sb.status, 'DEPLOYED');
    return sb;
  };
  const stdout = async (p: Proc, name: string, command: string) => {
    const r = await cluster.exec(p, name, command);
    const out = await r.json();
    assert.equal(r.status, 200, JSON.stringify(out));
    return out.stdout as string;
  };
  const epochOf = async (id: string) => (await cluster.nodes(a())).find((n) => n.id === id);
  /** What the database says of a sandbox that only its node writes (its `lastUsedAt` aside: any server's reads). */
  const truth = (sb: any) => ({
    node: sb.node,
    status: sb.status,
    state: sb.state,
    events: sb.events.map((e: any) => `${e.status} ${e.message}`),
  });

  it('stops serving and writing for them, removes its copies, registers again and takes new sandboxes', async () => {
    // Sandboxes until one is on a node that does not lead (node-a leads: a stopped leader moves nothing).
    const names: string[] = [];
    let victim: string | undefined;
    for (let i = 1; i <= 6 && !victim; i++) {
      const sb = await create(`fence-${i}`);
      names.push(sb.metadata.name);
      if (sb.node !== 'node-a') victim = sb.node;
    }
    assert.ok(victim, 'a sandbox placed on node-b or node-c');
    const b = cluster.node(victim);
    const mine = [];
    for (const name of names) if ((await get(a(), name)).node === victim) mine.push(name);
    // Files of the instances on the victim: a fresh instance elsewhere has none.
    for (const name of mine)
      assert.equal(await stdout(b, name, 'echo -n old > /tmp/instance; cat /tmp/instance'), 'old');
    const before = await epochOf(victim);

    b.child.kill('SIGSTOP');
    let resumed = false;
    try {
      // The leader places them on the other nodes, each told it was lost on the victim, and they answer there.
      const moved = new Map<string, any>();
      const lastUsed = new Map<string, string | undefined>();
      for (const name of mine) {
        let sb = await get(a(), name);
        for (let i = 0; i < 200 && !(sb.status === 'DEPLOYED' && sb.node !== victim); i++) {
          await sleep(100);
          sb = await get(a(), name);
        }
        assert.ok(sb.status === 'DEPLOYED' && sb.node !== victim, JSON.stringify(sb));
        assert.match(
          sb.events.findLast((e: any) => e.message.startsWith('lost:'))?.message ?? JSON.stringify(sb.events),
          new RegExp(`^lost: node ${victim}, which ran this sandbox, stopped`),
        );
        assert.equal(await stdout(a(), name, 'cat /tmp/instance 2>/dev/null || echo -n fresh'), 'fresh');
        const now = await get(a(), name);
        moved.set(name, truth(now));
        lastUsed.set(name, now.lastUsedAt);
      }
      // A request for the first sandbox reaches the victim while it is stopped: it is read as soon as it resumes.
      const early = cluster.exec(b, mine[0], 'cat /tmp/instance 2>/dev/null || echo -n fresh');
      b.child.kill('SIGCONT');
      resumed = true;
      const r = await early;
      const body = await r.text();
      // Never answered by the victim's old instance: refused while it registers again, or sent to the new node.
      if (r.status === 200) assert.equal(JSON.parse(body).stdout, 'fresh', body);
      else assert.equal(r.status, 503, body);

      // For a bounded window after it resumed, what the database says of them is the new nodes' alone.
      // (Its last use only moves forward: the victim's own, older, would move it back.)
      for (const until = Date.now() + 4000; Date.now() < until; await sleep(200))
        for (const [name, t] of moved) {
          const sb = await get(a(), name);
          assert.deepEqual(truth(sb), t, name);
          const was = lastUsed.get(name);
          if (was)
            assert.ok(Date.parse(sb.lastUsedAt) >= Date.parse(was), `${name}: ${sb.lastUsedAt} < ${was}`);
        }

      // It registered again with a higher epoch, holds none of their instances, and sends their requests on.
      let now = await epochOf(victim);
      for (let i = 0; i < 50 && !(now.healthy && now.epoch > before.epoch && now.instances === 0); i++) {
        await sleep(100);
        now = await epochOf(victim);
      }
      assert.ok(now.healthy && now.epoch > before.epoch, JSON.stringify({ before, now }));
      assert.equal(now.instances, 0, JSON.stringify(now));
      for (const name of mine)
        assert.equal(await stdout(b, name, 'cat /tmp/instance 2>/dev/null || echo -n fresh'), 'fresh');
    } finally {
      if (!resumed) b.child.kill('SIGCONT');
    }

    // It takes new sandboxes again: with the third node drained, a new one lands on it (it holds the least).
    const third = IDS.find((id) => id !== 'node-a' && id !== victim) as string;
    const d = await cluster.api(a(), `/nodes/${third}/drain`, { method: 'POST' });
    assert.equal(d.status, 200, await d.text());
    let onVictim: string | undefined;
    for (let i = 1; i <= 5 && !onVictim; i++) {
      const sb = await create(`fence-new-${i}`);
      if (sb.node === victim) onVictim = sb.metadata.name;
    }
    assert.ok(onVictim, `a new sandbox placed on ${victim}`);
    assert.equal(await stdout(a(), onVictim, 'echo -n placed-again'), 'placed-again');
    assert.equal(await stdout(b, onVictim, 'echo -n here'), 'here');
  });
});
