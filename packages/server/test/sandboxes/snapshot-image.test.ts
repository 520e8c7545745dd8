// A snapshot promoted to an image (decision 053): a sandbox on a registry image writes and deletes files, its
// snapshot becomes an image of the workspace, and a new sandbox started from that image by name sees the writes and
// not the deleted file. A snapshot of a sandbox on the default image (the host's userland) cannot: a 409 says why.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  busyboxLayer,
  Pusher,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../../src/runtime/images/test-support/registry.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { type SandboxServer, startSandboxServer } from './support.js';

let server: SandboxServer;
let reg: TestRegistry;
before(async () => {
  [server, reg] = await Promise.all([startSandboxServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
});
after(async () => {
  await server.close();
  await reg.stop();
});

const sh = async (name: string, command: string) => {
  const res = await server.run(`${server.url}/run/default/sandboxes/${name}/process`, {
    method: 'POST',
    json: { command, waitForCompletion: true },
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return String(body.stdout ?? '');
};

test('a snapshot becomes an image a new sandbox starts from: its writes there, its deletions gone', async () => {
  const app = await tarOf([{ name: 'srv/hello.txt', body: 'hello from the registry\n' }]);
  const img = await new Pusher(reg).image('team/base', 'v1', [await busyboxLayer(), app], {
    Env: ['PATH=/bin'],
  });
  await server.create('tmpl-src', { runtime: { image: img.reference } });
  await sh('tmpl-src', 'echo written > /srv/new.txt && rm /srv/hello.txt');
  const snap = await (
    await server.api('/sandboxes/tmpl-src/snapshots', { method: 'POST', json: { name: 'tmpl' } })
  ).json();
  const made = await server.api(`/snapshots/${snap.id}/image`, { method: 'POST', json: { name: 'tmpl:1' } });
  const image = await made.json();
  assert.equal(made.status, 200, JSON.stringify(image));
  await server.create('from-tmpl', { runtime: { image: 'tmpl:1' } });
  assert.equal(
    await sh('from-tmpl', 'cat /srv/new.txt; test -e /srv/hello.txt && echo there || echo gone'),
    'written\ngone\n',
  );

  await server.create('tmpl-host');
  const hostSnap = await (
    await server.api('/sandboxes/tmpl-host/snapshots', { method: 'POST', json: { name: 'h' } })
  ).json();
  const refused = await server.api(`/snapshots/${hostSnap.id}/image`, {
    method: 'POST',
    json: { name: 'h:1' },
  });
  assert.equal(refused.status, 409);
  assert.match((await refused.json()).detail, /default image/);
});
