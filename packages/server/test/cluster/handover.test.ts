// Two `berth serve` processes on one PostgreSQL, the second pass of issue 24: what a follower answers from the
// holder of the instances (an upload URL it issues, an agent's replica count), a workspace deleted through the
// follower cleaned from the holder's disk, and `berth node drain` of the leader: the other server leads, the
// sandbox is told it was lost on the drained node and answers again through both servers. Each node lists its quota
// settings; a server whose differ from another node's says so; every server judges with the leader's.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { workspaceBuildsDir } from '../../src/builds/layout.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { berth } from '../berth-cli.js';
import { stopped } from '../serve-process.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';
import { putZip, templateZip, through } from './upload-support.js';

describe('a cluster of two servers: answers from the holder, drain', () => {
  // node-b is started with another replicas quota than node-a's, as an operator's mistake.
  const cluster = useCluster(['node-a', 'node-b'], {
    env: { BERTH_PUBLIC_URL: 'http://berth.cluster.test' },
    envOf: (id): Record<string, string> =>
      id === 'node-b' ? { BERTH_QUOTA_REPLICAS: '77', BERTH_QUOTA_SANDBOXES: '1' } : {},
  });
  const { api, run } = cluster;
  let a: Proc;
  let b: Proc;
  let key: string;
  let tenant: Tenant;
  const exec = async (p: Proc, sandbox: string, word: string) => {
    for (let i = 0; ; i++) {
      const r = await cluster.exec(p, sandbox, `echo -n ${word}`);
      const out = await r.json();
      if (r.status === 200) return out.stdout;
      assert.ok(i < 150, `${r.status} ${JSON.stringify(out)}`);
      await sleep(100);
    }
  };
  const node = async (p: Proc, id: string) => (await cluster.nodes(p)).find((n) => n.id === id);

  before(async () => {
    a = cluster.node('node-a');
    b = cluster.node('node-b');
    key = cluster.key;
    tenant = await newTenant(cluster.server(a), 'tenant-c2');
  });

  it("each node lists its quota settings, a server whose differ says so, and every server judges with the leader's", async () => {
    const nodes = await cluster.nodes(a);
    const quotas = (id: string) => nodes.find((n) => n.id === id)?.quotas;
    assert.equal(quotas('node-b')?.replicas, 77, JSON.stringify(nodes));
    assert.notEqual(quotas('node-a')?.replicas, 77, JSON.stringify(nodes));
    assert.deepEqual(Object.keys(quotas('node-a') ?? {}).sort(), Object.keys(quotas('node-b') ?? {}).sort());
    for (let i = 0; i < 50 && !/node node-a judges workspace quotas/.test(b.stderr()); i++) await sleep(100);
    assert.match(
      b.stderr(),
      /node node-a judges workspace quotas with other BERTH_QUOTA_\* settings than this server/,
    );
    // One set for the cluster: both servers judge with the leader's (node-a's); node-b's own (77 replicas, 1 sandbox)
    // are unused while it follows: two sandboxes created through node-b both pass.
    for (const p of [a, b]) {
      const q = (await (await api(p, '/quotas')).json()).quotas;
      assert.equal(q.replicas.limit, quotas('node-a')?.replicas, `${p.id}: ${JSON.stringify(q.replicas)}`);
    }
    for (const name of ['quota-1', 'quota-2']) {
      const r = await api(b, '/sandboxes', {
        method: 'POST',
        json: { metadata: { name }, spec: { runtime: { memory: 256 } } },
      });
      assert.equal(r.status, 200, `${name}: ${await r.text()}`);
    }
    for (const name of ['quota-1', 'quota-2'])
      assert.equal((await api(b, `/sandboxes/${name}`, { method: 'DELETE' })).status, 200);
    for (const name of ['quota-1', 'quota-2'])
      for (let i = 0; i < 300 && (await api(b, `/sandboxes/${name}`)).status !== 404; i++) await sleep(100);
  });

  it('an upload URL issued through the follower takes the code through the follower; the agent deploys', async () => {
    const r = await api(b, '/agents/py?upload=true', {
      method: 'PUT',
      json: { metadata: { name: 'py' }, spec: { runtime: { memory: 256 } } },
    });
    assert.equal(r.status, 200, await r.text());
    const url = r.headers.get('x-blaxel-upload-url') ?? '';
    assert.ok(url.startsWith('http://berth.cluster.test/uploads/'), url);
    const up = await putZip(through(b, url), await templateZip());
    assert.equal(up.status, 200, await up.text());
    // Used once: another tenant holding the URL gets nothing through either server.
    for (const p of [b, a]) assert.equal((await putZip(through(p, url), await templateZip())).status, 404);
    let o: any;
    for (let i = 0; i < 600; i++) {
      o = await (await api(b, '/agents/py')).json();
      if (o.status === 'DEPLOYED' || o.status === 'FAILED') break;
      await sleep(100);
    }
    assert.equal(o.status, 'DEPLOYED', JSON.stringify(o.events));
  });

  it("another tenant's upload URL, issued through the follower, lands in that tenant's workspace only", async () => {
    const r = await api(b, '/agents/py?upload=true', {
      method: 'PUT',
      key: tenant.key,
      json: { metadata: { name: 'py' }, spec: { runtime: { memory: 256 } } },
    });
    assert.equal(r.status, 200, await r.text());
    const before = (await (await api(a, '/agents/py')).json()).source.digest;
    const up = await putZip(
      through(b, r.headers.get('x-blaxel-upload-url') as string),
      await templateZip('c'),
    );
    const stored = await up.json();
    assert.equal(up.status, 200, JSON.stringify(stored));
    assert.notEqual(stored.digest, before);
    assert.equal(
      (await (await api(a, '/agents/py')).json()).source.digest,
      before,
      "the first tenant's agent",
    );
    const theirs = await (await api(b, '/agents/py', { key: tenant.key })).json();
    assert.equal(theirs.source?.digest, stored.digest, 'in their own workspace');
    assert.ok(existsSync(join(workspaceBuildsDir(a.dir, tenant.home), 'code')), "on the holder's disk");
  });

  it("counts the agent's replicas through the follower as the holder does", async () => {
    const res = await run(b, 'agents/py', { inputs: 'hello' });
    assert.equal(res.status, 200, await res.text());
    const onA = (await (await api(a, '/agents/py')).json()).replicas;
    assert.ok(onA >= 1, String(onA));
    assert.equal((await (await api(b, '/agents/py')).json()).replicas, onA);
  });

  it("removes from the holder's disk the builds of a workspace deleted through the follower", async () => {
    const headers = { 'x-service-workspace': 'gone-c2' };
    assert.equal((await api(b, '/workspaces', { method: 'POST', json: { name: 'gone-c2' } })).status, 200);
    const made = await api(b, '/agents/z', {
      method: 'PUT',
      headers,
      json: { metadata: { name: 'z' }, spec: {} },
    });
    assert.equal(made.status, 200, await made.text());
    const code = await api(b, '/agents/z/code', {
      method: 'PUT',
      headers: { ...headers, 'content-type': 'application/zip' },
      body: await templateZip('z'),
    });
    assert.equal(code.status, 200, await code.text());
    const dir = workspaceBuildsDir(a.dir, 'gone-c2');
    assert.ok(existsSync(dir), "the code is on the holder's disk");
    assert.ok((await api(b, '/agents/z', { method: 'DELETE', headers })).ok);
    for (let i = 0; ; i++) {
      const del = await api(b, '/workspaces/gone-c2', { method: 'DELETE' });
      if (del.ok) break;
      assert.ok(i < 100, `${del.status} ${await del.text()}`);
      await sleep(100);
    }
    for (let i = 0; i < 100 && existsSync(dir); i++) await sleep(100);
    assert.equal(existsSync(dir), false, 'the deleted workspace left its builds on the holder');
  });

  it('refuses drain and undrain to the admin of another workspace', async () => {
    const other = await newTenant(cluster.server(a), 'tenant-c2b');
    for (const verb of ['drain', 'undrain'])
      for (const p of [b, a]) {
        const r = await api(p, `/nodes/node-a/${verb}`, { method: 'POST', key: other.key });
        assert.equal(r.status, 403, `${verb}: ${r.status}`);
      }
    assert.equal((await node(b, 'node-a')).drained, false);
    const missing = await api(b, '/nodes/no-such-node/drain', { method: 'POST' });
    assert.equal(missing.status, 404);
  });

  it('`berth node drain` of the leader: the other leads, a sandbox it held is told and answers again through both', async () => {
    const r = await api(b, '/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'sbx-drain' }, spec: { runtime: { memory: 256 } } },
    });
    const created = await r.json();
    assert.equal(r.status, 200, JSON.stringify(created));
    assert.equal(await exec(b, 'sbx-drain', 'before'), 'before');
    const cli = await berth({ url: b.url, adminKey: key }, ['node', 'drain', 'node-a']);
    assert.equal(cli.code, 0, cli.out);
    assert.match(cli.stdout, /node node-a drained/);
    // The drained leader hands over and exits (75), for its supervisor to start it again as a follower.
    await stopped(a.child);
    assert.equal(a.child.exitCode, 75);
    for (let i = 0; i < 100 && !(await node(b, 'node-b')).leads.includes('controllers'); i++)
      await sleep(100);
    assert.deepEqual((await node(b, 'node-b')).leads, ['controllers']);
    assert.equal(await exec(b, 'sbx-drain', 'after'), 'after');
    // Placed on the drained node, it is told and placed on node-b; placed on node-b, it ran on untouched.
    const sb = await (await api(b, '/sandboxes/sbx-drain')).json();
    assert.equal(sb.node, 'node-b');
    const lost = sb.events.find((e: any) => e.message.startsWith('lost:'));
    if (created.node === 'node-a')
      assert.match(
        lost?.message ?? JSON.stringify(sb.events),
        /node node-a, which ran this sandbox.*node-b starts it/,
      );
    else assert.equal(lost, undefined, JSON.stringify(sb.events));
    // Started again, the drained node follows: it does not lead, and it sends the sandbox's requests on.
    a = await cluster.start('node-a');
    await sleep(1500);
    const drained = await node(a, 'node-a');
    assert.equal(drained.drained, true);
    assert.deepEqual(drained.leads, []);
    assert.deepEqual((await node(a, 'node-b')).leads, ['controllers']);
    assert.equal(await exec(a, 'sbx-drain', 'both'), 'both');
    // node-b leads now: its settings are the cluster's, on node-a too.
    for (const p of [a, b])
      assert.equal(
        (await (await api(p, '/quotas')).json()).quotas.replicas.limit,
        77,
        `${p.id} after the handover`,
      );
    const undo = await berth({ url: a.url, adminKey: key }, ['node', 'undrain', 'node-a']);
    assert.equal(undo.code, 0, undo.out);
    assert.equal((await node(b, 'node-a')).drained, false);
  });
});
