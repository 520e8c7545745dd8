// Volumes in a cluster (docs/decisions/102-volumes-stay-on-their-node.md): a volume's data stays on the node that
// made it, recorded as its `node`, and a sandbox mounting it is placed there, through any server. When that node is
// killed its sandbox stays placed on it (saying why) and a new one mounting the volume is refused naming the node,
// instead of starting elsewhere on an empty volume; once the node is back the sandbox reads what was written before.
// A deleted volume's data goes from its node's disk. A second tenant sees none of it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { newTenant } from '../../src/test-support/tenants.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

describe("a volume's data stays on the node that made it, and what mounts it runs there", () => {
  // No standby during the test: the writer's processes stay as they are across the kill.
  const cluster = useCluster(['node-a', 'node-b'], {
    prefix: 'volumes-nodes',
    env: { BERTH_STANDBY_AFTER: '600' },
  });
  const { api } = cluster;
  const a = () => cluster.node('node-a');
  const b = () => cluster.node('node-b');
  const get = async (p: Proc, path: string) => (await api(p, path)).json();
  const mounting = (name: string, volume = 'data') => ({
    metadata: { name },
    spec: { runtime: { memory: 256 }, volumes: [{ name: volume, mountPath: '/data' }] },
  });
  const stdout = async (p: Proc, name: string, command: string) => {
    const r = await cluster.exec(p, name, command);
    const out = await r.json();
    assert.equal(r.status, 200, JSON.stringify(out));
    return out.stdout as string;
  };
  const until = async (what: string, ok: () => Promise<boolean>, tries = 300) => {
    for (let i = 0; i < tries; i++) {
      if (await ok()) return;
      await sleep(100);
    }
    assert.fail(`never: ${what}`);
  };

  it('records the node that made the volume, and places a sandbox mounting it there through any server', async () => {
    for (const name of ['data', 'spare']) {
      const r = await api(b(), '/volumes', {
        method: 'POST',
        json: { metadata: { name }, spec: { size: 64 } },
      });
      assert.equal(r.status, 200, await r.text());
      await until(
        `volume ${name} DEPLOYED`,
        async () => (await get(b(), `/volumes/${name}`)).status === 'DEPLOYED',
      );
      const v = await get(b(), `/volumes/${name}`);
      assert.equal(v.node, 'node-a', 'made by the leader, on its disk');
    }
    const s = await api(b(), '/sandboxes', { method: 'POST', json: mounting('writer') });
    const sb = await s.json();
    assert.equal(s.status, 200, JSON.stringify(sb));
    assert.equal(sb.node, 'node-a');
    assert.equal(await stdout(b(), 'writer', 'echo -n kept > /data/f && cat /data/f'), 'kept');
  });

  it('the node killed: its sandbox stays placed there saying why, and a new one mounting the volume is refused naming it', async () => {
    await cluster.kill('node-a');
    await until('node-b leads and node-a is unhealthy', async () => {
      const list = await cluster.nodes(b());
      return (
        !!list.find((n) => n.id === 'node-b')?.leads.includes('controllers') &&
        list.find((n) => n.id === 'node-a')?.healthy === false
      );
    });
    await until("the writer's event", async () =>
      ((await get(b(), '/sandboxes/writer')).events ?? []).some((e: { message: string }) =>
        /its volumes are on node node-a, which is not answering/.test(e.message),
      ),
    );
    assert.equal((await get(b(), '/sandboxes/writer')).node, 'node-a', 'not moved onto an empty volume');
    const r = await api(b(), '/sandboxes', { method: 'POST', json: mounting('probe', 'spare') });
    const problem = await r.json();
    assert.equal(r.status, 503, JSON.stringify(problem));
    assert.match(problem.detail, /its volumes are on node node-a, which is not answering/);
    assert.equal((await api(b(), '/sandboxes/probe')).status, 404, 'nothing of the refused create is kept');
  });

  it('the node back: the sandbox reads what was written before', async () => {
    await cluster.start('node-a');
    await until(
      'node-a healthy',
      async () => !!(await cluster.nodes(b())).find((n) => n.id === 'node-a')?.healthy,
    );
    let out = '';
    await until(
      'the writer answers',
      async () => {
        const r = await cluster.exec(b(), 'writer', 'cat /data/f');
        if (r.status !== 200) return false;
        out = (await r.json()).stdout;
        return true;
      },
      600,
    );
    assert.equal(out, 'kept');
    assert.equal((await get(a(), '/sandboxes/writer')).node, 'node-a');
  });

  it('a second tenant sees neither the volume nor the sandbox through any server', async () => {
    const t = await newTenant(cluster.server(b()), 'tenant-volumes');
    for (const p of [a(), b()]) {
      assert.equal((await api(p, '/volumes/data', { key: t.key })).status, 404, p.id);
      const run = await cluster.exec(p, 'writer', 'cat /data/f', t.key);
      assert.ok([403, 404].includes(run.status), `${p.id}: ${run.status}`);
    }
  });

  it("a deleted volume's data goes from its node's disk", async () => {
    const dir = join(a().dir, 'volumes', 'default', 'data');
    assert.ok(existsSync(dir), 'the data is on node-a');
    assert.ok(!existsSync(join(b().dir, 'volumes', 'default', 'data')), 'and not on node-b');
    assert.equal((await api(b(), '/sandboxes/writer', { method: 'DELETE' })).status, 200);
    await until('the volume free', async () => !(await get(b(), '/volumes/data')).state?.attachedTo);
    const d = await api(b(), '/volumes/data', { method: 'DELETE' });
    assert.ok([200, 202].includes(d.status), await d.text());
    await until('the volume gone', async () => (await api(b(), '/volumes/data')).status === 404);
    await until('its data gone from node-a', async () => !existsSync(dir), 100);
  });
});
