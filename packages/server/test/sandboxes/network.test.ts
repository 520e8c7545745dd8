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
import { createHash } from 'node:crypto';
import { sandboxId } from '../../src/runtime/sandbox-id.js';
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
  // Both ends of the test link are host addresses: the second is the one an egress IP is allocated.
  server = await startSandboxServer({
    BERTH_EGRESS_RESOLVERS: UPSTREAM.address,
    BERTH_EGRESS_GATEWAYS: `office=${UPSTREAM.gateway},${UPSTREAM.host}`,
    // The upstream stands for the internet on the benchmarking range, which is reserved: opened like a LAN.
    BERTH_SANDBOX_ALLOW_CIDRS: UPSTREAM.cidr,
  });
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

test('routing secrets are never read back (only the create that sent them echoes them); an egress gateway the server does not have fails the sandbox, saying so', async () => {
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
  assert.deepEqual(
    created.spec.network.proxy.routing[0].secrets,
    { k: secret },
    'echoed to the caller that sent it',
  );
  assert.ok(!JSON.stringify(body).includes(secret), 'not in a GET');
  assert.equal(
    body.spec.network.proxy.routing[0].secrets,
    undefined,
    'left out of reads, as the service does',
  );
  assert.match(body.events.at(-1).message, /egress gateway gw is not configured on this server/);
});

test('proxy.routing from the API: the routed host gets the secret; the sandbox never sees it, nor does a read', async () => {
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

/** The source address the upstream saw (its sockets are dual-stack: IPv4 shows as ::ffff:a.b.c.d). */
const fromOf = (stdout: string) => String(JSON.parse(stdout).from).replace(/^::ffff:/, '');

test('a sandbox on an egress gateway leaves from its allocated egress IP; usage names it', async () => {
  const post = async (path: string, json: unknown) => {
    const res = await server.api(path, { method: 'POST', json });
    assert.equal(res.status, 200, await res.clone().text());
    return res.json();
  };
  const vpc = await post('/vpcs', { metadata: { name: 'net' }, spec: {} });
  await post('/vpcs/net/egressgateways', { metadata: { name: 'office' }, spec: {} });
  await post('/vpcs/net/egressgateways/office/ips', { metadata: { name: 'ip1' }, spec: {} });
  let ip: any;
  for (let i = 0; i < 500 && ip?.status !== 'DEPLOYED'; i++, await new Promise((r) => setTimeout(r, 20)))
    ip = await (await server.api('/vpcs/net/egressgateways/office/ips/ip1')).json();
  assert.equal(ip.spec.publicIp, UPSTREAM.gateway, 'the first free address of the pool');
  // A name whose sticky choice over the whole pool would be the other address (the link's default source), so
  // only the allocation makes the upstream see the egress IP.
  const ws = vpc.metadata.workspace;
  let name = '';
  for (let i = 0; !name; i++) {
    const n = `net-gw-${i}`;
    if (createHash('sha256').update(sandboxId(ws, n)).digest().readUInt32BE(0) % 2 === 1) name = n;
  }
  const created = await server.create(name, {
    network: { allowedDomains: ['allowed.test'], egress: { mode: 'gateway', gateway: 'office' } },
  });
  await server.waitFor(name, (b) => b.status === 'DEPLOYED', 'DEPLOYED');
  const proxied = await exec(server, created.metadata.url, 'curl -sS --max-time 5 http://allowed.test/');
  assert.equal(fromOf(proxied.stdout), UPSTREAM.gateway, 'plain HTTP through the proxy');
  const tls = await exec(server, created.metadata.url, 'curl -sSk --max-time 5 https://allowed.test/');
  assert.equal(fromOf(tls.stdout), UPSTREAM.gateway, 'an opaque HTTPS tunnel');
  const usage = await (await server.api('/egressgateways/usage')).json();
  assert.deepEqual(usage.office, [name]);
});
