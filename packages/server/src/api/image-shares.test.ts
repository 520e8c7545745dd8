// Images of the service's shape between tenants (decision 051), each tenant acting with its own key on a real server:
// a share stays pending until the target's admin accepts it (then the target holds the name, charged to its quota,
// until the source revokes it), a declined one leaves nothing, a third workspace sees none of it and can answer none
// of it, a name the target holds for other content is a conflict unless forced; tags, cleanup and the service's
// createImage. No sandbox is started here.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  busyboxLayer,
  Pusher,
  savedArchive,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK, startTestServer, type TestServer } from '../test-support/server.js';
import { newTenant, type Tenant } from '../test-support/tenants.js';

const layer = (who: string) => tarOf([{ name: 'who', body: who }]);

describe('image sharing, tags and cleanup between tenants', () => {
  let s: TestServer;
  let reg: TestRegistry;
  let a: Tenant;
  let b: Tenant;
  let c: Tenant;
  let aMember: string;
  let boxId: string;

  const call = async (t: Tenant | string, path: string, init: { method?: string; json?: unknown } = {}) => {
    const r = await s.api(path, { ...init, key: typeof t === 'string' ? t : t.key });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  };
  const ok = async (t: Tenant | string, path: string, init: { method?: string; json?: unknown } = {}) => {
    const r = await call(t, path, init);
    assert.ok(r.status < 300, `${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const importAs = async (t: Tenant, who: string, tags: string[]) => {
    const { archive, id } = await savedArchive([await busyboxLayer(), await layer(who)], tags);
    const r = await s.api('/images/import', {
      method: 'POST',
      body: new Uint8Array(archive),
      headers: { 'content-type': 'application/x-tar' },
      key: t.key,
    });
    assert.ok(r.ok, await r.text());
    return id;
  };

  before(async () => {
    [s, reg] = await Promise.all([startTestServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
    a = await newTenant(s, 'share-a');
    b = await newTenant(s, 'share-b');
    c = await newTenant(s, 'share-c');
    const sa = await ok(a, '/service_accounts', {
      method: 'POST',
      json: { name: 'a-member', role: 'member' },
    });
    aMember = (await ok(a, `/service_accounts/${sa.client_id}/api_keys`, { method: 'POST', json: {} }))
      .apiKey;
    boxId = await importAs(a, 'a', ['sandboxes/box:1']);
  });
  after(async () => {
    await s.close();
    await reg.stop();
  });

  it('a share is pending until the target accepts; only the two workspaces see it; a revoke takes it back', async () => {
    assert.equal(
      (
        await call(aMember, '/images/sandboxes/box/share', {
          method: 'POST',
          json: { targetWorkspace: b.home },
        })
      ).status,
      403,
      'a member cannot give an image away',
    );
    const shared = await call(a, '/images/sandboxes/box/share', {
      method: 'POST',
      json: { targetWorkspace: b.home },
    });
    assert.equal(shared.status, 202);
    assert.deepEqual(
      [
        shared.body.sourceWorkspace,
        shared.body.targetWorkspace,
        shared.body.resourceType,
        shared.body.imageName,
      ],
      [a.home, b.home, 'sandboxes', 'box'],
    );
    // Not B's yet.
    assert.equal((await call(b, '/images/sandboxes/box')).status, 404);
    assert.deepEqual(
      (await ok(b, '/pending-image-shares')).map((p: any) => p.id),
      [shared.body.id],
    );
    assert.deepEqual(
      (await ok(a, '/pending-image-shares?direction=outgoing')).map((p: any) => p.id),
      [shared.body.id],
    );
    assert.deepEqual(await ok(a, '/pending-image-shares'), [], "A's incoming list is its own");
    // A third workspace sees nothing and can answer nothing.
    assert.deepEqual(await ok(c, '/pending-image-shares'), []);
    assert.deepEqual(await ok(c, '/pending-image-shares?direction=outgoing'), []);
    assert.equal(
      (await call(c, `/pending-image-shares/${shared.body.id}/accept`, { method: 'POST' })).status,
      404,
    );
    assert.equal(
      (await call(c, `/pending-image-shares/${shared.body.id}/decline`, { method: 'POST' })).status,
      404,
    );
    assert.equal((await call(c, '/images/sandboxes/box/share')).status, 404);
    assert.equal((await call(c, `/images/sandboxes/box/share/${b.home}`, { method: 'DELETE' })).status, 404);
    // B accepts: the name is B's own now, saying where it came from.
    const accepted = await ok(b, `/pending-image-shares/${shared.body.id}/accept`, { method: 'POST' });
    assert.equal(accepted.id, boxId);
    assert.equal(accepted.metadata.sourceWorkspace, a.home);
    assert.deepEqual(accepted.references, ['docker.io/sandboxes/box:1']);
    assert.equal((await ok(b, '/images/sandboxes/box:1')).id, boxId);
    assert.deepEqual(await ok(a, '/images/sandboxes/box/share'), [
      { workspace: b.home, status: 'active', accountId: '' },
    ]);
    // Charged to B: the accepted image counts toward B's image bytes (busybox: a bit over 1 MB).
    assert.ok((await ok(b, '/quotas')).quotas.images.used >= 1, "B's image quota holds it");
    assert.equal((await call(c, '/images/sandboxes/box:1')).status, 404, 'C still holds nothing');
    // A revokes: B's name goes.
    await ok(a, `/images/sandboxes/box/share/${b.home}`, { method: 'DELETE' });
    assert.equal((await call(b, '/images/sandboxes/box:1')).status, 404);
    assert.deepEqual(await ok(a, '/images/sandboxes/box/share'), []);
    assert.equal((await ok(a, '/images/sandboxes/box:1')).id, boxId, "A's own name stays");
  });

  it('a declined share leaves nothing; a name the target holds is a conflict unless forced', async () => {
    const first = await ok(a, '/images/sandboxes/box/share', {
      method: 'POST',
      json: { targetWorkspace: b.home },
    });
    assert.equal(
      (await call(b, `/pending-image-shares/${first.id}/decline`, { method: 'POST' })).status,
      204,
    );
    assert.deepEqual(await ok(b, '/pending-image-shares'), []);
    assert.equal((await call(b, '/images/sandboxes/box:1')).status, 404);
    assert.equal(
      (await call(b, `/pending-image-shares/${first.id}/accept`, { method: 'POST' })).status,
      404,
      'declined is gone',
    );
    // B has its own sandboxes/box:1.
    const own = await importAs(b, 'b', ['sandboxes/box:1']);
    const second = await ok(a, '/images/sandboxes/box/share', {
      method: 'POST',
      json: { targetWorkspace: b.home },
    });
    assert.equal((await ok(b, '/pending-image-shares'))[0].hasConflict, true);
    const refused = await call(b, `/pending-image-shares/${second.id}/accept`, { method: 'POST' });
    assert.equal(refused.status, 409);
    assert.equal((await ok(b, '/images/sandboxes/box:1')).id, own, 'refused: B keeps its own');
    await ok(b, `/pending-image-shares/${second.id}/accept?force=true`, { method: 'POST' });
    assert.equal((await ok(b, '/images/sandboxes/box:1')).id, boxId);
    await ok(a, `/images/sandboxes/box/share/${b.home}`, { method: 'DELETE' });
  });

  it("another workspace's image is no base for a build: FROM and COPY --from by its id are refused", async () => {
    const build = async (t: Tenant, dockerfile: string) => {
      const r = await s.api('/images/build?t=stolen/box:1', {
        method: 'POST',
        body: new Uint8Array(await tarOf([{ name: 'Dockerfile', body: dockerfile }])),
        headers: { 'content-type': 'application/x-tar' },
        key: t.key,
      });
      const lines = (await r.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      return { status: r.status, error: lines.find((l) => l.error)?.error as string | undefined };
    };
    for (const dockerfile of [`FROM ${boxId}\n`, `FROM scratch\nCOPY --from=${boxId} /who /who\n`]) {
      const r = await build(c, dockerfile);
      assert.equal(r.status, 200, "the refusal is the build log's error line");
      assert.match(r.error ?? '', /not among this workspace's images/, dockerfile);
    }
    assert.deepEqual(await ok(c, '/images'), [], 'C holds nothing of it');
    // A, whose image it is, builds on it.
    assert.equal((await build(a, `FROM ${boxId}\n`)).error, undefined);
    await ok(a, '/images/stolen/box:1', { method: 'DELETE' });
  });

  it('sharing with no workspace, or an image A lacks, is refused', async () => {
    assert.equal(
      (
        await call(a, '/images/sandboxes/box/share', {
          method: 'POST',
          json: { targetWorkspace: 'no-such-ws' },
        })
      ).status,
      422,
    );
    assert.equal(
      (
        await call(a, '/images/sandboxes/nothing/share', {
          method: 'POST',
          json: { targetWorkspace: b.home },
        })
      ).status,
      404,
    );
    assert.equal(
      (await call(a, '/images/sandboxes/box/share', { method: 'POST', json: { targetWorkspace: a.home } }))
        .status,
      422,
    );
  });

  it('tags: one goes, the others stay; a tagless name without :latest is every tag', async () => {
    await importAs(a, 'a2', ['tools/kit:1']);
    await importAs(a, 'a3', ['tools/kit:2']);
    const both = await ok(a, '/images/tools/kit');
    assert.deepEqual(both.spec.tags.map((t: any) => t.name).sort(), ['1', '2']);
    assert.equal(both.metadata.resourceType, 'tools');
    assert.equal(both.metadata.name, 'kit');
    await ok(a, '/images/tools/kit/tags/1', { method: 'DELETE' });
    assert.deepEqual(
      (await ok(a, '/images/tools/kit')).spec.tags.map((t: any) => t.name),
      ['2'],
    );
    assert.equal((await call(a, '/images/tools/kit/tags/1', { method: 'DELETE' })).status, 404);
    await importAs(a, 'a4', ['tools/kit:3']);
    await ok(a, '/images/tools/kit', { method: 'DELETE' });
    assert.equal((await call(a, '/images/tools/kit')).status, 404, 'every tag went');
  });

  it("cleanup lets go of what nothing of the workspace names, and keeps what a spec names; the service's createImage pulls", async () => {
    await importAs(a, 'kept', ['keep/me:1']);
    await importAs(a, 'dropped', ['drop/me:1']);
    await ok(a, '/agents', {
      method: 'POST',
      json: { metadata: { name: 'names-an-image' }, spec: { runtime: { image: 'keep/me:1' } } },
    });
    const r = await ok(a, '/images', { method: 'DELETE' });
    assert.ok(r.deleted >= 1 && /drop\/me:1/.test(r.message), JSON.stringify(r));
    assert.equal((await call(a, '/images/keep/me:1')).status, 200);
    assert.equal((await call(a, '/images/drop/me:1')).status, 404);
    assert.equal((await call(b, '/images/keep/me:1')).status, 404, "B's cleanup or reads never reach A's");
    const pushed = await new Pusher(reg).image('team/prebuilt', 'v1', [await busyboxLayer()]);
    const created = await ok(a, '/images', {
      method: 'POST',
      json: { name: 'prebuilt', resourceType: 'sandboxes', image: pushed.reference },
    });
    assert.equal(created.id, pushed.configDigest);
    assert.equal((await ok(a, '/images/sandboxes/prebuilt')).id, pushed.configDigest);
    const noImage = await call(a, '/images', {
      method: 'POST',
      json: { name: 'x', resourceType: 'sandboxes' },
    });
    assert.equal(noImage.status, 422);
    assert.match(noImage.body.detail, /images\/build/);
  });
});
