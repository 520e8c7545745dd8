// Applications (decision 054) end to end on real sandboxes, driven by the unmodified @blaxel/core SDK: an image of
// the workspace (pulled from a loopback registry) runs as it is, its CMD on spec.port, with the spec's envs; its URL
// answers anyone through the gateway (path and host forms); an update makes a new deploy; an application bound to a
// sandbox reaches that sandbox's port. A second tenant cannot read A's application nor bind A's sandbox.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
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
import { newTenant } from '../../src/test-support/tenants.js';
import {
  exec,
  getWithHost,
  removeAllSandboxes,
  type SandboxServer,
  startSandboxServer,
} from '../sandboxes/support.js';

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
  const sdk = async (step: string, env: Record<string, string> = {}) =>
    JSON.parse(
      await runBlaxelScript(CLIENT, s, { APP_IMAGE: image, ...env, SANDBOX: 'site' }, 120_000, [step]),
    );

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-apps-data-'));
    [s, reg] = await Promise.all([
      startSandboxServer({ ...OUTBOUND_LOOPBACK, BERTH_INFERENCE_HOST: INFERENCE_HOST }, dataDir),
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
    await removeAllSandboxes(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
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
    const b = await newTenant(s, 'tenant-b');
    const asB = { 'x-blaxel-authorization': `Bearer ${b.key}`, 'x-blaxel-workspace': b.home };
    const read = await s.api('/applications/web', { headers: asB, key: b.key });
    assert.equal(read.status, 404);
    const bind = await s.api('/applications', {
      method: 'POST',
      key: b.key,
      headers: asB,
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
      headers: asB,
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
