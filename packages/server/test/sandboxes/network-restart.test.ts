// A server restart with a sandbox under an egress policy: the sandbox stays policed while the server is down, and
// the next server puts its policy back, routing secrets included (records never hold them; the controller does).
// Its own file: the egress child's ports are the host's, so no other server with egress may run meanwhile.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  startUpstream,
  UPSTREAM_2 as UPSTREAM,
  type Upstream,
} from '../../src/runtime/linux/test-support/egress-upstream.js';
import { exec, removeAllSandboxes, startSandboxServer } from './support.js';
import { removeDirLater } from '../../src/test-support/sandboxes.js';

let up: Upstream;
let caDir: string;
const savedExtraCa = process.env.NODE_EXTRA_CA_CERTS;
before(async () => {
  up = await startUpstream(UPSTREAM);
  caDir = mkdtempSync(join(tmpdir(), 'berth-net-ca-'));
  writeFileSync(join(caDir, 'ca.pem'), up.certPem);
  process.env.NODE_EXTRA_CA_CERTS = join(caDir, 'ca.pem'); // the proxy trusts the test upstream
});
after(async () => {
  await up?.stop();
  if (savedExtraCa === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
  else process.env.NODE_EXTRA_CA_CERTS = savedExtraCa;
  rmSync(caDir, { recursive: true, force: true });
});

test('a restarted server keeps the sandbox under its policy and puts the routing secrets back', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-net-restart-'));
  // The upstream stands for the internet on the benchmarking range, which is reserved: opened like a LAN.
  const env = { BERTH_EGRESS_RESOLVERS: UPSTREAM.address, BERTH_SANDBOX_ALLOW_CIDRS: UPSTREAM.cidr };
  const secret = 'sk-survives-a-restart-4410';
  let s = await startSandboxServer(env, dir);
  try {
    const created = await s.create('net-restart', {
      network: {
        allowedDomains: ['allowed.test'],
        proxy: {
          routing: [
            {
              destinations: ['allowed.test'],
              headers: { 'x-api-key': '{{SECRET:k}}' },
              secrets: { k: secret },
            },
          ],
        },
      },
    });
    const curl = async (url: string) =>
      (
        await exec(
          s,
          created.metadata.url.replace(/^http:\/\/[^/]+/, s.url),
          `curl -sS --max-time 5 ${url}; echo " $?"`,
        )
      ).stdout.trim();
    assert.match(await curl('https://allowed.test/'), new RegExp(secret));
    await s.close();
    s = await startSandboxServer(env, dir);
    await s.waitFor('net-restart', (b) => b.status === 'DEPLOYED', 'DEPLOYED');
    let seen = '';
    for (let i = 0; i < 100 && !seen.includes(secret); i++) {
      seen = await curl('https://allowed.test/');
      if (!seen.includes(secret)) await new Promise((r) => setTimeout(r, 100));
    }
    assert.match(seen, new RegExp(secret), 'the secret is injected again after the restart');
    assert.doesNotMatch(await curl('https://other.test/'), /"upstream":true/, 'still refused');
  } finally {
    await s.close();
    await removeAllSandboxes(dir);
    removeDirLater(dir);
  }
});
