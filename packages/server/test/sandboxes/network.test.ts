// Sandbox network policy through the API: the unmodified @blaxel/core SDK sets `network.allowedDomains` on create
// and changes it with updateNetwork; curl inside the sandbox sees each policy. Upstreams live in a namespace this
// test makes (runtime/linux/test-support/egress-upstream.ts), and the server asks its DNS for allowed names.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  startUpstream,
  UPSTREAM,
  type Upstream,
} from '../../src/runtime/linux/test-support/egress-upstream.js';
import { runBlaxelScript } from '../../src/test-support/blaxel.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { exec, type SandboxServer, startSandboxServer, TEST_MEMORY_MB } from './support.js';

let server: SandboxServer;
let up: Upstream;
let caDir: string;
const savedExtraCa = process.env.NODE_EXTRA_CA_CERTS;
before(async () => {
  up = await startUpstream(UPSTREAM);
  // How an operator makes the proxy trust a private upstream CA: NODE_EXTRA_CA_CERTS of the server.
  caDir = mkdtempSync(join(tmpdir(), 'berth-net-ca-'));
  writeFileSync(join(caDir, 'ca.pem'), up.certPem);
  process.env.NODE_EXTRA_CA_CERTS = join(caDir, 'ca.pem');
  server = await startSandboxServer({ BERTH_EGRESS_RESOLVERS: UPSTREAM.address });
});
after(async () => {
  await server?.close();
  await up?.stop();
  if (savedExtraCa === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
  else process.env.NODE_EXTRA_CA_CERTS = savedExtraCa;
  rmSync(caDir, { recursive: true, force: true });
});

test('@blaxel/core: network.allowedDomains on create is enforced inside, and updateNetwork changes it live', async () => {
  const stdout = await runBlaxelScript(join(import.meta.dirname, 'blaxel-network.mjs'), server, {
    SANDBOX_NAME: 'sdk-net',
    SANDBOX_MEMORY: String(TEST_MEMORY_MB),
    UPSTREAM_CA: up.certPem,
  });
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  assert.ok(line, `the SDK script printed no result: ${stdout}`);
  const r = JSON.parse(line.slice('RESULT '.length));
  assert.equal(r.created.status, 'DEPLOYED');
  assert.deepEqual(r.created.network, { allowedDomains: ['allowed.test'] });
  assert.deepEqual(r.before, { allowed: '200 0', other: '000 56' });
  assert.deepEqual(r.after, { allowed: '000 56', other: '200 0' });
});

test('routing secrets are never answered; an egress gateway the server does not have fails the sandbox, saying so', async () => {
  const secret = 'sk-api-never-answered-5521';
  const created = await server.create('net-unenforced', {
    network: {
      egress: { mode: 'gateway', gateway: 'gw' },
      proxy: {
        routing: [{ destinations: ['api.test'], headers: { a: '{{SECRET:k}}' }, secrets: { k: secret } }],
      },
    },
  });
  const body = await server.waitFor('net-unenforced', (b) => b.status === 'FAILED', 'FAILED');
  assert.ok(!JSON.stringify(created).includes(secret), 'not in the create answer');
  assert.ok(!JSON.stringify(body).includes(secret), 'not in a GET');
  assert.match(body.events.at(-1).message, /egress gateway gw is not configured on this server/);
});

test('proxy.routing from the API: the routed host gets the secret, the sandbox and the API never show it', async () => {
  const secret = 'sk-routed-through-the-api-8812';
  const created = await server.create('net-routed', {
    network: {
      allowedDomains: ['allowed.test'],
      proxy: {
        routing: [
          {
            destinations: ['allowed.test'],
            headers: { 'X-Api-Key': '{{SECRET:k}}' },
            secrets: { k: secret },
          },
        ],
      },
    },
  });
  const seen = await exec(server, created.metadata.url, 'curl -sS --max-time 5 https://allowed.test/');
  assert.equal(JSON.parse(seen.stdout).headers['x-api-key'], secret);
  const env = await exec(server, created.metadata.url, 'env');
  assert.ok(!env.stdout.includes(secret), 'not in the environment');
  const got = await (await server.api('/sandboxes/net-routed')).text();
  assert.ok(!got.includes(secret), 'not in a GET');
});
