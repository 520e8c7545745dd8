// Sandboxes of two tenants on images of the same names (docs/decisions/037-image-names-per-workspace.md), each
// tenant acting with its own key on real sandboxes: B importing its own content as A's local name and as the
// registry's name A's sandboxes use changes nothing A's new sandboxes run, and B naming A's image by id is refused.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  busyboxLayer,
  Pusher,
  savedArchive,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../../src/runtime/images/test-support/registry.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import { type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';

const whoLayer = (who: string) =>
  tarOf([
    { name: 'srv/', type: 'directory' },
    { name: 'srv/who', body: who },
  ]);

describe('image names of sandboxes across tenants', () => {
  let s: SandboxServer;
  let reg: TestRegistry;
  let a: Tenant;
  let b: Tenant;
  let registryRef: string;
  before(async () => {
    [s, reg] = await Promise.all([startSandboxServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
    a = await newTenant(s, 'img-a');
    b = await newTenant(s, 'img-b');
    const img = await new Pusher(reg).image(
      'team/app',
      'v1',
      [await busyboxLayer(), await whoLayer('registry')],
      {
        Env: ['PATH=/bin'],
      },
    );
    registryRef = img.reference;
  });
  after(async () => {
    await s?.close();
    await reg?.stop();
  });

  /** Creates `t`'s sandbox on `image` (its own key) and answers what /srv/who says inside it. */
  async function whoIn(t: Tenant, name: string, image: string): Promise<string> {
    const res = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name }, spec: { runtime: { image, memory: TEST_MEMORY_MB } } },
      key: t.key,
    });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.status, 'DEPLOYED', JSON.stringify(body.events?.at(-1)));
    const r = await fetch(`${s.url}/run/${t.home}/sandboxes/${name}/process`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-blaxel-authorization': `Bearer ${t.key}` },
      body: JSON.stringify({ command: 'cat /srv/who', waitForCompletion: true }),
    });
    const out = await r.json();
    assert.equal(r.status, 200, JSON.stringify(out));
    return out.stdout;
  }

  const importAs = async (t: Tenant, archive: Buffer, name: string) => {
    const r = await s.api(`/images/import?name=${encodeURIComponent(name)}`, {
      method: 'POST',
      body: new Uint8Array(archive),
      headers: { 'content-type': 'application/x-tar' },
      key: t.key,
    });
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    return body[0];
  };

  it("another tenant's imports under A's names change nothing A's new sandboxes run", async () => {
    assert.equal(await whoIn(a, 'on-registry-1', registryRef), 'registry', 'pulled for the sandbox');
    const mine = await savedArchive([await busyboxLayer(), await whoLayer('tenant a')], [], {
      Env: ['PATH=/bin'],
    });
    await importAs(a, mine.archive, 'local/app:1');
    assert.equal(await whoIn(a, 'on-local-1', 'local/app:1'), 'tenant a');

    const theirs = await savedArchive([await busyboxLayer(), await whoLayer('tenant b')], [], {
      Env: ['PATH=/bin'],
    });
    await importAs(b, theirs.archive, 'local/app:1');
    await importAs(b, theirs.archive, registryRef);
    assert.equal(await whoIn(b, 'b-on-registry-name', registryRef), 'tenant b', "B's own import, for B");

    assert.equal(await whoIn(a, 'on-registry-2', registryRef), 'registry');
    assert.equal(await whoIn(a, 'on-local-2', 'local/app:1'), 'tenant a');
  });

  it("a sandbox naming another tenant's image by id is refused at create (422), and nothing runs", async () => {
    const own = await savedArchive([await busyboxLayer(), await whoLayer('a by id')], []);
    const img = await importAs(a, own.archive, 'local/by-id:1');
    assert.equal(await whoIn(a, 'a-by-id', img.id), 'a by id', 'its own image by id, for A');
    const res = await s.api('/sandboxes', {
      method: 'POST',
      json: { metadata: { name: 'b-by-id' }, spec: { runtime: { image: img.id, memory: TEST_MEMORY_MB } } },
      key: b.key,
    });
    const body = await res.json();
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.errors[0].pointer, '/spec/runtime/image');
    assert.equal((await s.api('/sandboxes/b-by-id', { key: b.key })).status, 404, 'nothing was created');
  });
});
