// Three `berth serve` processes on one PostgreSQL database, each with its own data dir (docs/decisions/059-cluster-
// placement.md): sandboxes created through one server are placed across the nodes and each runs on its node only; a
// drained node's sandboxes are placed again elsewhere and new ones avoid it; the unmodified @blaxel/core SDK creates a
// sandbox, execs and writes and reads a file through a server that is not its node; another tenant reaches none of
// them through any server; after a kill -9 of a node, its sandboxes carry the `lost:` event naming it and run again
// on a healthy node. Regions (decision 077): node-c alone also serves `eu-lon-1`; a sandbox asking for it, created
// through a server that does not serve it, runs on node-c, stays there when node-c is drained, and a new one is then
// refused naming the region and nothing else.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { TEST_MEMORY_MB } from '../sandboxes/support.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const NAMES = ['place-1', 'place-2', 'place-3', 'place-4', 'place-5'];

describe('a cluster of three servers places sandboxes across its nodes', () => {
  const cluster = useCluster(['node-a', 'node-b', 'node-c'], {
    prefix: 'place',
    envOf: (id) => ({ BERTH_REGIONS: id === 'node-c' ? 'local,eu-lon-1' : 'local' }),
  });
  const { procs, api, exec } = cluster;
  const byId = (id: string) => cluster.node(id);
  const get = async (p: Proc, name: string) => (await api(p, `/sandboxes/${name}`)).json();
  /** Waits until the sandbox is DEPLOYED on a node `ok` accepts; returns it. */
  const deployedOn = async (p: Proc, name: string, ok: (node: string) => boolean) => {
    let sb = await get(p, name);
    for (let i = 0; i < 300 && !(sb.status === 'DEPLOYED' && ok(sb.node)); i++) {
      await sleep(100);
      sb = await get(p, name);
    }
    assert.ok(sb.status === 'DEPLOYED' && ok(sb.node), JSON.stringify(sb));
    return sb;
  };
  const answers = async (p: Proc, name: string, word: string) => {
    const r = await exec(p, name, `echo -n ${word}`);
    const out = await r.json();
    assert.equal(r.status, 200, JSON.stringify(out));
    assert.equal(out.stdout, word);
  };

  const placed = new Map<string, string>();
  it('places sandboxes created through one server on more than one node, each running on its node only', async () => {
    const a = byId('node-a');
    for (const name of NAMES) {
      const r = await api(a, '/sandboxes', {
        method: 'POST',
        json: { metadata: { name }, spec: { runtime: { memory: TEST_MEMORY_MB } } },
      });
      const sb = await r.json();
      assert.equal(r.status, 200, JSON.stringify(sb));
      assert.equal(sb.status, 'DEPLOYED');
      assert.ok(['node-a', 'node-b', 'node-c'].includes(sb.node), JSON.stringify(sb));
      placed.set(name, sb.node);
    }
    assert.ok(new Set(placed.values()).size > 1, JSON.stringify([...placed]));
    // Every server reads the same placement, and each node holds exactly its own sandboxes.
    for (const p of procs) for (const [name, node] of placed) assert.equal((await get(p, name)).node, node);
    for (const p of procs) {
      const mine = [...placed.values()].filter((n) => n === p.id).length;
      let list: any[] = [];
      for (let i = 0; i < 50; i++) {
        list = await (await api(a, '/nodes')).json();
        if (list.find((n) => n.id === p.id)?.instances === mine) break;
        await sleep(100);
      }
      assert.equal(list.find((n) => n.id === p.id)?.instances, mine, JSON.stringify(list));
    }
    // A sandbox's address answers through every server, whichever node holds it.
    for (const p of procs) await answers(p, NAMES[0], `via-${p.id}`);
  });

  it('places a sandbox asking for a region on a node serving it, through a server that does not', async () => {
    const a = byId('node-a');
    const r = await api(a, '/sandboxes', {
      method: 'POST',
      json: {
        metadata: { name: 'place-eu' },
        spec: { region: 'eu-lon-1', runtime: { memory: TEST_MEMORY_MB } },
      },
    });
    const sb = await r.json();
    assert.equal(r.status, 200, JSON.stringify(sb));
    assert.equal(sb.node, 'node-c');
    assert.equal(sb.spec.region, 'eu-lon-1');
    await answers(a, 'place-eu', 'in-eu');
    const c = (await cluster.nodes(a)).find((n) => n.id === 'node-c');
    assert.deepEqual(c?.regions, ['local', 'eu-lon-1']);
    assert.equal(typeof c?.warm, 'object');
  });

  it("places a drained node's sandboxes again elsewhere, and no new sandbox on it", async () => {
    const a = byId('node-a');
    assert.equal(placed.size, NAMES.length);
    const r = await api(a, '/nodes/node-c/drain', { method: 'POST' });
    assert.equal(r.status, 200, await r.text());
    for (const [name, node] of placed) {
      const sb = await deployedOn(a, name, (n) => n !== 'node-c');
      if (node === 'node-c')
        assert.match(
          sb.events.find((e: any) => e.message.startsWith('lost:'))?.message ?? JSON.stringify(sb.events),
          /^lost: node node-c, which ran this sandbox, stopped.*Node node-[ab] starts it again/,
        );
      placed.set(name, sb.node);
      await answers(byId('node-c'), name, 'moved');
    }
    // No other node serves eu-lon-1: that sandbox stays on node-c (still running) and says what it waits for.
    // The leader writes that event at its next pass over node-c's sandboxes: on a loaded machine, seconds.
    const leaving = (sb: any) =>
      sb.events.findLast((e: any) => /no node of region "eu-lon-1"/.test(e.message));
    let eu = await get(a, 'place-eu');
    for (let i = 0; i < 300 && !leaving(eu); i++) {
      await sleep(100);
      eu = await get(a, 'place-eu');
    }
    assert.equal(eu.node, 'node-c');
    assert.match(
      leaving(eu)?.message ?? JSON.stringify(eu.events),
      /^node node-c, which holds this sandbox, is leaving .*no node of region "eu-lon-1" can take this sandbox now: none of its nodes is healthy and undrained.*stays placed on node node-c/,
    );
    await answers(a, 'place-eu', 'still-there');
    // A new one is refused, to the operator and to a tenant alike: the region is named, no node, nothing of others.
    const t = await newTenant(cluster.server(a), 'tenant-region');
    for (const key of [undefined, t.key]) {
      const r = await api(a, '/sandboxes', {
        method: 'POST',
        key,
        json: {
          metadata: { name: 'place-eu-2' },
          spec: { region: 'eu-lon-1', runtime: { memory: TEST_MEMORY_MB } },
        },
      });
      const body = await r.text();
      assert.equal(r.status, 503, body);
      assert.match(body, /no node of region \\"eu-lon-1\\" can take this sandbox now/);
      assert.doesNotMatch(body, /node-|place-eu"|127\.0\.0\.1/);
      assert.equal((await api(a, '/sandboxes/place-eu-2', { key })).status, 404, 'nothing half-written');
    }
  });

  it('runs the unmodified SDK through a server that is not the sandbox node: create, exec, write and read a file', async () => {
    const c = byId('node-c');
    const stdout = await runBlaxelScript(
      join(import.meta.dirname, 'blaxel-cluster.mjs'),
      { url: c.url, adminKey: cluster.key },
      { SANDBOX_NAME: 'place-sdk', SANDBOX_MEMORY: String(TEST_MEMORY_MB) },
    );
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
    assert.ok(line, stdout);
    const out = JSON.parse(line.slice('RESULT '.length));
    assert.deepEqual(out, { create: 'DEPLOYED', exec: '42', fs: 'through another node' });
    const sb = await get(c, 'place-sdk');
    assert.ok(['node-a', 'node-b'].includes(sb.node), JSON.stringify(sb));
    placed.set('place-sdk', sb.node);
  });

  it("refuses another tenant the first one's sandboxes through every server", async () => {
    const a = byId('node-a');
    const t = await newTenant(cluster.server(a), 'tenant-place');
    for (const p of procs)
      for (const name of placed.keys()) {
        const run = await exec(p, name, 'id', t.key);
        assert.ok([403, 404].includes(run.status), `${name} through ${p.id}: ${run.status}`);
        // The held routes of a sandbox (its debug report) are sent on by the caller's workspace: its own, empty.
        const debug = await api(p, `/sandboxes/${name}/debug`, { key: t.key });
        assert.equal(debug.status, 404, `${name} debug through ${p.id}`);
      }
  });

  it('after a kill -9 of a node, its sandboxes carry the lost event naming it and run again on a healthy node', async () => {
    // A node holding a sandbox; the leader (node-a) only if node-b holds none.
    const victim = [...placed.values()].includes('node-b') ? 'node-b' : 'node-a';
    const survivor = victim === 'node-b' ? 'node-a' : 'node-b';
    assert.ok([...placed.values()].includes(victim), JSON.stringify([...placed]));
    await cluster.kill(victim);
    const c = byId('node-c');
    for (const [name, node] of placed) {
      if (node !== victim) continue;
      const sb = await deployedOn(c, name, (n) => n === survivor);
      assert.match(
        sb.events.findLast((e: any) => e.message.startsWith('lost:'))?.message ?? JSON.stringify(sb.events),
        new RegExp(
          `^lost: node ${victim}, which ran this sandbox, stopped.*Node ${survivor} starts it again`,
        ),
      );
      for (let i = 0; i < 50; i++) {
        const r = await exec(c, name, 'echo -n again');
        if (r.status === 200) {
          assert.equal((await r.json()).stdout, 'again');
          break;
        }
        assert.ok(i < 49, await r.text());
        await sleep(100);
      }
    }
  });
});
