// Applications (decision 054) end to end on real sandboxes, driven by the unmodified @blaxel/core SDK: an image of
// the workspace (pulled from a loopback registry) runs as it is, its CMD on spec.port, with the spec's envs; its URL
// answers anyone through the gateway (path and host forms); an update makes a new deploy; an application bound to a
// sandbox reaches that sandbox's port. A second tenant cannot read A's application nor bind A's sandbox. Custom domains
// (decision 055): claimed, verified against a real DNS server on loopback, routed by Host, shared by consent only.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  nodeLayer,
  Pusher,
  startRegistry,
  type TestRegistry,
  toolsLayer,
} from '../../src/runtime/images/test-support/registry.js';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { type FakeResolver, startFakeResolver } from '../../src/runtime/egress/test-support.js';
import { newTenant, type Tenant } from '../../src/test-support/tenants.js';
import {
  exec,
  getWithHost,
  removeAllSandboxes,
  type SandboxServer,
  startSandboxServer,
} from '../sandboxes/support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

const SERVER = `require('node:http').createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ greeting: process.env.GREETING, port: process.env.PORT, path: req.url }));
}).listen(3000, '0.0.0.0');`;
const CLIENT = join(import.meta.dirname, 'applications-client.mjs');
const INFERENCE_HOST = 'run.berth.test';

describe('applications through the SDK', () => {
  let s: SandboxServer;
  let reg: TestRegistry;
  let dataDir: string;
  let image: string;
  let b: Tenant;
  let dns: FakeResolver;
  /** The TXT records the test's DNS server answers, changed as the test publishes challenges. */
  const txt: Record<string, string[]> = {};
  const asB = () => ({ 'x-blaxel-workspace': b.home });
  const sdk = async (step: string, env: Record<string, string> = {}) =>
    JSON.parse(
      await runBlaxelScript(CLIENT, s, { APP_IMAGE: image, ...env, SANDBOX: 'site' }, 120_000, [step]),
    );

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-apps-data-'));
    dns = await startFakeResolver({}, txt);
    [s, reg] = await Promise.all([
      startSandboxServer(
        { ...OUTBOUND_LOOPBACK, BERTH_INFERENCE_HOST: INFERENCE_HOST, BERTH_DOMAIN_RESOLVERS: dns.server },
        dataDir,
      ),
      startRegistry(),
    ]);
    const pushed = await new Pusher(reg).image(
      'test/web',
      'v1',
      [await toolsLayer('app-node'), await nodeLayer()],
      {
        Env: ['PATH=/opt/node/bin:/bin'],
        Cmd: ['node', '-e', SERVER],
      },
    );
    const pulled = await s.api('/images', { method: 'POST', json: { reference: pushed.reference } });
    assert.equal(pulled.status, 200, await pulled.text());
    image = pushed.reference;
  });
  after(async () => {
    await s.close();
    await reg.stop();
    dns.close();
    await removeAllSandboxes(dataDir);
    removeDirLater(dataDir);
  });

  it('runs the image on its port, answers anyone at its URL, keeps revisions and redeploys on update', async () => {
    const r = await sdk('create');
    assert.equal(r.created.spec.port, 3000);
    assert.equal(r.deployed.status, 'DEPLOYED', JSON.stringify(r.deployed.events));
    assert.deepEqual(r.list, ['web']);
    assert.equal(r.revisions.length, 1);
    assert.equal(r.revisions[0].image, image);
    assert.equal(r.revisions[0].port, 3000);
    assert.equal(r.again.status, 409);
    const url: string = r.deployed.metadata.url;
    assert.match(url, /^http:\/\/app-web-default\.[a-z0-9-]+\.run\.berth\.test:\d+$/);
    // No credential: applications are public.
    const byPath = await fetch(`${s.url}/run/default/applications/web/hello?x=1`);
    assert.equal(byPath.status, 200);
    assert.deepEqual(await byPath.json(), { greeting: 'hello', port: '3000', path: '/hello?x=1' });
    const byHost = await getWithHost(`${s.url}/`, new URL(url).host);
    assert.equal(byHost.status, 200, byHost.body);
    assert.equal(JSON.parse(byHost.body).greeting, 'hello');

    const u = await sdk('update');
    assert.equal(u.updated.status, 'DEPLOYED');
    assert.deepEqual(u.updated.spec.envs, [{ name: 'GREETING', value: 'bonjour' }]);
    const again = await fetch(`${s.url}/run/default/applications/web/`);
    assert.equal((await again.json()).greeting, 'bonjour');
  });

  it('binds an application to a sandbox of its workspace, and refuses what it cannot honour', async () => {
    await s.create('site');
    // The path form: the host form's name resolves nowhere in a test.
    const site = `${s.url}/run/default/sandboxes/site`;
    await s.waitFor('site', (b) => b.status === 'DEPLOYED', 'DEPLOYED');
    const res = await s.run(`${site}/process`, {
      method: 'POST',
      json: {
        command:
          'mkdir -p /tmp/site && echo bound-ok > /tmp/site/index.html && cd /tmp/site && exec python3 -m http.server 3001',
        waitForPorts: [3001],
      },
    });
    assert.equal(res.status, 200, await res.text());
    const r = await sdk('bound');
    assert.equal(r.bound.status, 200, JSON.stringify(r.bound.error));
    assert.equal(r.boundState, 'DEPLOYED');
    assert.equal(r.legacy.status, 200, JSON.stringify(r.legacy.error));
    assert.equal(r.urls.status, 422);
    const page = await fetch(`${s.url}/run/default/applications/bound/index.html`);
    assert.equal(page.status, 200);
    assert.equal((await page.text()).trim(), 'bound-ok');
    const legacy = await fetch(`${s.url}/run/default/applications/legacy/index.html`);
    assert.equal((await legacy.text()).trim(), 'bound-ok');
    assert.equal((await exec(s, site, 'true')).exitCode, 0);
  });

  it("a second tenant cannot read A's application nor bind A's sandbox", async () => {
    b = await newTenant(s, 'tenant-b');
    const read = await s.api('/applications/web', { headers: asB(), key: b.key });
    assert.equal(read.status, 404);
    const bind = await s.api('/applications', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: {
        metadata: { name: 'steal' },
        spec: { extensions: { 'ai.blaxel.experimental/bind-to-sandbox': { sandbox: 'site' } } },
      },
    });
    const body = await bind.json();
    assert.equal(bind.status, 422, JSON.stringify(body));
    const missing = await s.api('/applications', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: {
        metadata: { name: 'steal' },
        spec: { extensions: { 'ai.blaxel.experimental/bind-to-sandbox': { sandbox: 'nothing-here' } } },
      },
    });
    const missingBody = await missing.json();
    // The same answer as for a sandbox that exists nowhere: A's names are not told.
    assert.equal(missing.status, 422);
    assert.equal(
      JSON.stringify(body.errors ?? body.detail).replace('site', 'X'),
      JSON.stringify(missingBody.errors ?? missingBody.detail).replace('nothing-here', 'X'),
    );
    // B's address of the same name reaches nothing of A's.
    const viaB = await fetch(`${s.url}/run/${b.home}/applications/web/`);
    assert.equal(viaB.status, 401);
  });

  it('a custom domain: claimed, verified through DNS, routed to the application, shared only by consent', async () => {
    const c = await sdk('claim');
    assert.equal(c.claimed.status, 200, JSON.stringify(c.claimed.error));
    assert.equal(c.claimed.data.spec.status, 'pending');
    const [[txtName, txtValue]] = Object.entries(c.claimed.data.spec.txtRecords as Record<string, string>);
    assert.equal(txtName, '_berth-challenge.shop.example.test');
    assert.equal(c.again.status, 409);
    assert.equal(c.forApp.status, 200, JSON.stringify(c.forApp.error));
    assert.equal(c.forApp.data.spec.domainType, 'applications');
    assert.equal(c.bad.status, 422);
    // Nothing published yet: failed, saying what to publish; nothing routes.
    assert.equal(c.failed.data.spec.status, 'failed');
    assert.match(
      c.failed.data.spec.verificationError,
      /no TXT record at _berth-challenge\.shop\.example\.test/,
    );
    assert.deepEqual(c.list.data.map((d: any) => d.metadata.name).sort(), [
      'shop.example.test',
      'www.example.test',
    ]);
    // B claims the same name while it is A's pending claim: allowed (a claim proves nothing), but B's challenge is its
    // own, and B cannot read A's.
    const claimB = await s.api('/customdomains', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: { metadata: { name: 'shop.example.test' } },
    });
    assert.equal(claimB.status, 200);
    const bValue = Object.values((await claimB.json()).spec.txtRecords)[0] as string;
    assert.notEqual(bValue, txtValue);

    txt[txtName] = [txtValue];
    const v = await sdk('verify');
    assert.equal(v.verified.data.spec.status, 'verified', JSON.stringify(v.verified));
    assert.equal(v.updated.data.metadata.displayName, 'Shop');
    assert.equal(v.app.status, 'DEPLOYED');
    assert.deepEqual(v.app.spec.urls, [{ domain: 'shop.example.test' }]);
    assert.equal(v.share.status, 200, JSON.stringify(v.share.error));
    assert.deepEqual(v.shares.data, [
      { workspace: 'tenant-b', status: 'pending', workspaceDisplayName: 'tenant-b' },
    ]);
    const viaDomain = await getWithHost(`${s.url}/checkout?id=7`, 'shop.example.test');
    assert.equal(viaDomain.status, 200, viaDomain.body);
    assert.deepEqual(JSON.parse(viaDomain.body), {
      greeting: 'bonjour',
      port: '3000',
      path: '/checkout?id=7',
    });
    const pending = await getWithHost(`${s.url}/`, 'www.example.test');
    assert.equal(pending.status, 404, 'a domain no application names routes nowhere');

    // B: its own claim of A's verified domain cannot be verified (409), even with its record published; it cannot
    // read A's record, nor point an application at the domain before A's offer is accepted.
    txt[txtName] = [txtValue, bValue];
    const verifyB = await s.api('/customdomains/shop.example.test/verify', {
      method: 'POST',
      key: b.key,
      headers: asB(),
    });
    assert.equal(verifyB.status, 409, await verifyB.text());
    const claimB2 = await s.api('/customdomains', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: { metadata: { name: 'www.example.test' } },
    });
    assert.equal(claimB2.status, 200);
    const readA = await s.api('/customdomains/www.example.test', { key: b.key, headers: asB() });
    assert.equal((await readA.json()).metadata.workspace, 'tenant-b', "B reads its own claim, never A's");
    await s.api('/customdomains/www.example.test', { method: 'DELETE', key: b.key, headers: asB() });
    assert.equal(
      (await s.api('/customdomains/www.example.test', { key: b.key, headers: asB() })).status,
      404,
    );
    const shareByB = await s.api('/customdomains/shop.example.test/share', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: { targetWorkspace: 'default' },
    });
    assert.equal(shareByB.status, 409, 'B cannot offer a domain it has not verified');
    // B drops its own claim and accepts A's offer: the copy says whose it is.
    await s.api('/customdomains/shop.example.test', { method: 'DELETE', key: b.key, headers: asB() });
    const accepted = await s.api('/customdomains/shop.example.test/accept', {
      method: 'POST',
      key: b.key,
      headers: asB(),
    });
    const copy = await accepted.json();
    assert.equal(accepted.status, 200, JSON.stringify(copy));
    assert.equal(copy.metadata.sharedFromWorkspace, 'default');
    assert.deepEqual(copy.spec.txtRecords, {}, "A's challenge is not copied");
    // One domain, one application: A's holds it.
    const appB = await s.api('/applications', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: { metadata: { name: 'shop' }, spec: { image: image, urls: [{ domain: 'shop.example.test' }] } },
    });
    assert.equal(appB.status, 409, await appB.text());
    const verifyCopy = await s.api('/customdomains/shop.example.test/verify', {
      method: 'POST',
      key: b.key,
      headers: asB(),
    });
    assert.equal(verifyCopy.status, 403, 'only the owner verifies or changes a shared domain');
    const shares = await (await s.api('/customdomains/shop.example.test/share')).json();
    assert.deepEqual(shares, [{ workspace: 'tenant-b', status: 'active', workspaceDisplayName: 'tenant-b' }]);
    const unshare = await s.api('/customdomains/shop.example.test/share/tenant-b', { method: 'DELETE' });
    assert.equal(unshare.status, 200);
    assert.equal(
      (await s.api('/customdomains/shop.example.test', { key: b.key, headers: asB() })).status,
      404,
    );
  });

  it('two workspaces verifying one domain at once: exactly one holds it', async () => {
    const name = 'race.example.test';
    const values: string[] = [];
    for (const [key, headers] of [
      [s.adminKey, {}],
      [b.key, asB()],
    ] as const) {
      const r = await s.api('/customdomains', { method: 'POST', key, headers, json: { metadata: { name } } });
      assert.equal(r.status, 200);
      values.push(Object.values((await r.json()).spec.txtRecords)[0] as string);
    }
    txt[`_berth-challenge.${name}`] = values;
    const answers = await Promise.all([
      s.api(`/customdomains/${name}/verify`, { method: 'POST' }),
      s.api(`/customdomains/${name}/verify`, { method: 'POST', key: b.key, headers: asB() }),
    ]);
    assert.deepEqual(answers.map((r) => r.status).sort(), [200, 409]);
    const states = await Promise.all([
      s.api(`/customdomains/${name}`).then((r) => r.json()),
      s.api(`/customdomains/${name}`, { key: b.key, headers: asB() }).then((r) => r.json()),
    ]);
    assert.equal(states.filter((d) => d.spec.status === 'verified').length, 1, JSON.stringify(states));
  });

  it("a deleted domain lets A's application go: another workspace verifies it and names it, A is told", async () => {
    const domain = 'shop.example.test';
    const challenge = `_berth-challenge.${domain}`;
    const del = await s.api(`/customdomains/${domain}`, { method: 'DELETE' });
    assert.equal(del.status, 200, await del.text());
    const web = await (await s.api('/applications/web')).json();
    assert.match(web.events.at(-1).message, /custom domain shop\.example\.test no longer routes/);
    assert.deepEqual(web.spec.urls, [{ domain }], 'the spec is left as the user wrote it');
    assert.equal((await getWithHost(`${s.url}/`, domain)).status, 404);

    // B now proves the domain and points its application at it: the label A's application held is free.
    const claim = await s.api('/customdomains', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: { metadata: { name: domain } },
    });
    assert.equal(claim.status, 200);
    txt[challenge] = [Object.values((await claim.json()).spec.txtRecords)[0] as string];
    const verify = await s.api(`/customdomains/${domain}/verify`, {
      method: 'POST',
      key: b.key,
      headers: asB(),
    });
    assert.equal((await verify.json()).spec.status, 'verified');
    const appB = await s.api('/applications', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: { metadata: { name: 'shop' }, spec: { image, urls: [{ domain }] } },
    });
    assert.equal(appB.status, 200, await appB.text());
    const putA = await s.api('/applications/web', {
      method: 'PUT',
      json: { metadata: { name: 'web' }, spec: web.spec },
    });
    assert.equal(putA.status, 422, 'A cannot name a domain it no longer holds');

    // B lets it go in turn; A verifies it again, and writing its application claims the domain back.
    await s.api(`/customdomains/${domain}`, { method: 'DELETE', key: b.key, headers: asB() });
    const shop = await (await s.api('/applications/shop', { key: b.key, headers: asB() })).json();
    assert.match(
      shop.events.at(-1).message,
      /no longer routes to this application: the custom domain was deleted/,
    );
    const again = await s.api('/customdomains', { method: 'POST', json: { metadata: { name: domain } } });
    txt[challenge] = [Object.values((await again.json()).spec.txtRecords)[0] as string];
    const reverified = await s.api(`/customdomains/${domain}/verify`, { method: 'POST' });
    assert.equal((await reverified.json()).spec.status, 'verified');
    assert.equal(
      (await getWithHost(`${s.url}/`, domain)).status,
      404,
      'not until the application is written',
    );
    const rewrite = await s.api('/applications/web', {
      method: 'PUT',
      json: { metadata: { name: 'web' }, spec: web.spec },
    });
    assert.equal(rewrite.status, 200, await rewrite.text());
    const routed = await getWithHost(`${s.url}/x`, domain);
    assert.equal(routed.status, 200, routed.body);
    assert.equal(JSON.parse(routed.body).path, '/x');
  });

  it("a preview's customDomain: refused until verified, then served by Host; never another workspace's", async () => {
    const domain = 'pv.example.test';
    const previewOf = (name: string, customDomain: string, key = s.adminKey, headers = {}) =>
      s.api('/sandboxes/site/previews', {
        method: 'POST',
        key,
        headers,
        json: { metadata: { name }, spec: { port: 3001, public: true, customDomain } },
      });
    const early = await previewOf('by-domain', domain);
    assert.equal(
      early.status,
      422,
      'a domain the workspace has not verified is refused, not stored unserved',
    );
    const claim = await s.api('/customdomains', { method: 'POST', json: { metadata: { name: domain } } });
    txt[`_berth-challenge.${domain}`] = [Object.values((await claim.json()).spec.txtRecords)[0] as string];
    const verified = await s.api(`/customdomains/${domain}/verify`, { method: 'POST' });
    assert.equal((await verified.json()).spec.status, 'verified');
    const made = await previewOf('by-domain', domain);
    assert.equal(made.status, 200, await made.text());
    const page = await getWithHost(`${s.url}/index.html`, domain);
    assert.equal(page.status, 200, page.body);
    assert.equal(page.body.trim(), 'bound-ok');
    // One domain, one target: an application of A cannot take it either.
    const twice = await s.api('/applications/other', {
      method: 'PUT',
      json: { metadata: { name: 'other' }, spec: { image, urls: [{ domain }] } },
    });
    assert.equal(twice.status, 409, await twice.text());

    // B, with a sandbox of its own, cannot point a preview at A's domain.
    const sbx = await s.api('/sandboxes', {
      method: 'POST',
      key: b.key,
      headers: asB(),
      json: { metadata: { name: 'site' }, spec: { runtime: { memory: 256 } } },
    });
    assert.equal(sbx.status, 200, await sbx.text());
    const stolen = await previewOf('steal', domain, b.key, asB());
    assert.equal(stolen.status, 422, await stolen.text());

    // A's domain deleted: the preview stops answering by it and says so.
    await s.api(`/customdomains/${domain}`, { method: 'DELETE' });
    assert.equal((await getWithHost(`${s.url}/index.html`, domain)).status, 404);
    const pv = await (await s.api('/sandboxes/site/previews/by-domain')).json();
    assert.ok(
      pv.events.some((e: { message: string }) =>
        /no longer routes to this preview: the custom domain was deleted/.test(e.message),
      ),
      JSON.stringify(pv.events),
    );
    await s.api('/sandboxes/site', { method: 'DELETE', key: b.key, headers: asB() });
  });

  it('deletes applications: their address no longer answers', async () => {
    await sdk('delete');
    for (let i = 0; i < 200; i++) {
      if ((await s.api('/applications/web')).status === 404) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal((await s.api('/applications/web')).status, 404);
    const gone = await fetch(`${s.url}/run/default/applications/web/`);
    assert.ok([401, 404].includes(gone.status), String(gone.status));
  });
});
