// Sandboxes from registry images through the whole server: the unmodified @blaxel/core SDK creates one from a
// loopback registry's image and runs a process in it; an image the registry lacks is FAILED with an event that
// names it (never a sandbox on the host userland).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  busyboxLayer,
  Pusher,
  startRegistry,
  type TestRegistry,
  tarOf,
} from '../../src/runtime/images/test-support/registry.js';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { OUTBOUND_LOOPBACK } from '../../src/test-support/server.js';
import { type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

let server: SandboxServer;
let reg: TestRegistry;
before(async () => {
  // The registry listens on loopback.
  [server, reg] = await Promise.all([startSandboxServer({ ...OUTBOUND_LOOPBACK }), startRegistry()]);
});
after(async () => {
  await server.close();
  await reg.stop();
});

test('@blaxel/core runs a sandbox on a registry image; a missing image is FAILED naming it', async () => {
  const app = await tarOf([{ name: 'srv/hello.txt', body: 'hello from the registry\n' }]);
  const img = await new Pusher(reg).image('team/app', 'v1', [await busyboxLayer(), app], {
    Env: ['PATH=/bin', 'GREETING=configured'],
    WorkingDir: '/srv',
  });
  const missing = `${reg.host}/team/app:nope`;
  const stdout = await runBlaxelScript(join(import.meta.dirname, 'images-client.mjs'), server, {
    SANDBOX_NAME: 'from-image',
    SANDBOX_IMAGE: img.reference,
    MISSING_IMAGE: missing,
    SANDBOX_MEMORY: String(TEST_MEMORY_MB),
  });
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, stdout);
  const r = JSON.parse(line.slice(7));
  assert.equal(r.created.status, 'DEPLOYED');
  assert.deepEqual(r.exec, { exitCode: 0, stdout: 'hello from the registry\nconfigured\n/srv\n' });
  const o = await (await server.api('/sandboxes/from-image-missing')).json();
  assert.equal(o.status, 'FAILED', JSON.stringify(r.missing));
  const failed = o.events.at(-1);
  assert.match(failed.message, /team\/app:nope: not found/);
});
