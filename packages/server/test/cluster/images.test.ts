// Images across the nodes of a cluster (docs/decisions/081-images-across-nodes.md): two `berth serve` processes on one
// PostgreSQL; node-a leads (the workspace's images are in its store), node-b alone also serves region `eu-img`, so a
// sandbox asking for it runs there. An image imported through node-b (held by node-a) runs a sandbox created through
// node-b on node-b, which copied it from node-a; a blob that rotted on node-a fails the sandbox naming the image, and an
// update starts it once the blob is right; a registry's image is pulled by node-b itself through its outbound
// rules; another tenant naming the first one's image id is refused, and the peer routes answer a caller without the
// cluster's token 404.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  busyboxLayer,
  Pusher,
  savedArchive,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../../src/runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { newTenant } from '../../src/test-support/tenants.js';
import { TEST_MEMORY_MB } from '../sandboxes/support.js';
import { type Proc, sleep, useCluster } from './cluster-support.js';

const REGION = 'eu-img';

describe('a sandbox on an image only the leader holds runs on another node', () => {
  const cluster = useCluster(['node-a', 'node-b'], {
    prefix: 'images',
    // What this file checks is the copy a node makes when a sandbox on the image starts there (081); copies made
    // ahead of need (087, test/cluster/images-ahead.test.ts) would make node-b hold the image before the sandbox asks.
    env: { ...OUTBOUND_LOOPBACK, BERTH_IMAGES_AHEAD: 'false' },
    envOf: (id) => ({ BERTH_REGIONS: id === 'node-b' ? `local,${REGION}` : 'local' }),
  });
  const { api, exec } = cluster;
  let reg: TestRegistry;
  let leaderOnly: string;
  before(async () => {
    reg = await startRegistry();
  });
  after(async () => {
    await reg?.stop();
  });
  const rootOn = (p: Proc, id: string) => existsSync(join(p.dir, 'images/oci/roots', id.slice(7)));
  const create = (p: Proc, name: string, image: string, key?: string) =>
    api(p, '/sandboxes', {
      method: 'POST',
      key,
      json: { metadata: { name }, spec: { region: REGION, runtime: { image, memory: TEST_MEMORY_MB } } },
    });
  const output = async (p: Proc, name: string, command: string) => {
    const r = await exec(p, name, command);
    const out = await r.json();
    assert.equal(r.status, 200, JSON.stringify(out));
    return out.stdout as string;
  };

  it('copies an image imported on the leader to the node a sandbox created through a follower is placed on', async () => {
    const [a, b] = [cluster.node('node-a'), cluster.node('node-b')];
    const files = await tarOf([
      { name: 'srv/', type: 'directory' },
      { name: 'srv/hello', body: 'held by the leader' },
    ]);
    const { archive: tar, id } = await savedArchive([await busyboxLayer(), files], ['local/only-leader:1']);
    leaderOnly = id;
    // Through node-b: image routes are served by the leader, so the image lands in node-a's store only.
    const imp = await api(b, '/images/import', {
      method: 'POST',
      body: new Uint8Array(tar),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(imp.status, 200, await imp.clone().text());
    assert.ok(rootOn(a, id), 'the leader holds it');
    assert.ok(!rootOn(b, id), 'node-b does not, yet');
    const r = await create(b, 'img-copied', 'local/only-leader:1');
    const sb = await r.json();
    assert.equal(r.status, 200, JSON.stringify(sb));
    assert.equal(sb.node, 'node-b');
    assert.equal(sb.status, 'DEPLOYED', JSON.stringify(sb));
    assert.ok(rootOn(b, id), 'node-b copied it');
    for (const p of [a, b])
      assert.equal(await output(p, 'img-copied', 'cat /srv/hello'), 'held by the leader');
    // By id too (the workspace holds it), through the follower: accepted, on the same image.
    const byId = await create(b, 'img-by-id', id);
    assert.equal(byId.status, 200, await byId.clone().text());
    assert.equal(await output(a, 'img-by-id', 'cat /srv/hello'), 'held by the leader');
  });

  it('fails a sandbox naming its image when a copied blob has the wrong bytes, and starts it on an update once it is right', async () => {
    const [a, b] = [cluster.node('node-a'), cluster.node('node-b')];
    const files = await tarOf([
      { name: 'srv/', type: 'directory' },
      { name: 'srv/fixed', body: 'right bytes' },
    ]);
    const { archive: tar, id } = await savedArchive([await busyboxLayer(), files], ['local/broken:1']);
    const imp = await api(a, '/images/import', {
      method: 'POST',
      body: new Uint8Array(tar),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(imp.status, 200, await imp.clone().text());
    // The leader's copy of the image's own layer rots on its disk (the busybox layer node-b already has).
    const [held] = await imp.json();
    const layer: string = held.layers.at(-1).digest;
    const blob = join(a.dir, 'images/oci/blobs/sha256', layer.slice(7));
    const good = readFileSync(blob);
    writeFileSync(blob, Buffer.alloc(good.length, 7));
    const spec = { region: REGION, runtime: { image: 'local/broken:1', memory: TEST_MEMORY_MB } };
    const r = await api(b, '/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'img-broken' }, spec },
    });
    assert.equal(r.status, 200, await r.clone().text());
    let sb = await r.json();
    for (let i = 0; i < 100 && sb.status !== 'FAILED'; i++) {
      await sleep(100);
      sb = await (await api(b, '/sandboxes/img-broken')).json();
    }
    assert.equal(sb.status, 'FAILED', JSON.stringify(sb));
    assert.match(
      JSON.stringify(sb.events),
      /the sandbox could not start: image local\/broken:1: blob sha256:[a-f0-9]+ arrived with digest sha256:/,
    );
    assert.ok(!rootOn(b, id), 'nothing installed');
    writeFileSync(blob, good);
    const put = await api(b, '/sandboxes/img-broken', {
      method: 'PUT',
      // FAILED stays until the spec changes (as for any failed start): the update is the retry.
      json: {
        metadata: { name: 'img-broken' },
        spec: { ...spec, runtime: { ...spec.runtime, envs: [{ name: 'RETRY', value: '1' }] } },
      },
    });
    assert.equal(put.status, 200, await put.clone().text());
    assert.equal(await output(a, 'img-broken', 'cat /srv/fixed'), 'right bytes');
  });

  it("pulls a registry's image on the node it is placed on, through that node's outbound rules", async () => {
    const [a, b] = [cluster.node('node-a'), cluster.node('node-b')];
    const files = await tarOf([
      { name: 'srv/', type: 'directory' },
      { name: 'srv/pulled', body: 'from the registry' },
    ]);
    const img = await new Pusher(reg).image('test/pulled', 'v1', [await busyboxLayer(), files]);
    const r = await create(a, 'img-pulled', img.reference);
    const sb = await r.json();
    assert.equal(r.status, 200, JSON.stringify(sb));
    assert.equal(sb.node, 'node-b');
    assert.equal(await output(a, 'img-pulled', 'cat /srv/pulled'), 'from the registry');
    assert.ok(rootOn(b, img.configDigest), 'node-b pulled it');
    assert.ok(!rootOn(a, img.configDigest), 'the leader did not');
  });

  it("refuses another tenant the first one's image by id, and the peer routes to anyone without the cluster's token", async () => {
    const [a, b] = [cluster.node('node-a'), cluster.node('node-b')];
    const t = await newTenant(cluster.server(b), 'tenant-img');
    for (const p of [a, b]) {
      const r = await create(p, 'stolen', leaderOnly, t.key);
      const body = await r.json();
      assert.equal(r.status, 422, JSON.stringify(body));
      assert.match(JSON.stringify(body), /is not among this workspace's images/);
    }
    const paths = [
      '/peer/images/default/resolve?name=local/only-leader:1',
      `/peer/images/default/resolve?name=${leaderOnly}`,
      `/peer/images/default/${leaderOnly}/blobs/${leaderOnly}`,
      `/peer/images/tenant-img/resolve?name=${leaderOnly}`,
    ];
    for (const p of [a, b])
      for (const path of paths)
        for (const headers of [
          {},
          { authorization: `Bearer ${t.key}` },
          { authorization: `Bearer ${cluster.key}` },
        ] as Record<string, string>[]) {
          const r = await fetch(`${p.url}${path}`, { headers });
          assert.equal(r.status, 404, `${p.id} ${path} ${JSON.stringify(headers)}`);
        }
    // Nothing of it reached the tenant's workspace on node-b.
    assert.deepEqual(await (await api(b, '/images', { key: t.key })).json(), []);
  });
});
