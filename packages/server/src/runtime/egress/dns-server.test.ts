// Berth's DNS: allowed names resolve as the upstream says; denied names are NXDOMAIN and never asked upstream
// (a peer's allowlist leaked data through DNS labels because its resolver forwarded every name).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EgressDns } from './dns-server.js';
import type { EgressPolicy } from './policy.js';
import { GuardedResolver } from './resolve.js';
import { type FakeResolver, queryA, startFakeResolver } from './test-support.js';

let upstream: FakeResolver;
let dns: EgressDns;
let port: number;
const policy: EgressPolicy = {
  allowedDomains: ['allowed.test', '*.allowed.test'],
  forbiddenDomains: ['no.allowed.test'],
};

before(async () => {
  upstream = await startFakeResolver({
    'allowed.test': '203.0.113.10',
    'x.allowed.test': '203.0.113.11',
    'no.allowed.test': '203.0.113.12',
    'denied.test': '203.0.113.13',
    'loop.allowed.test': '127.0.0.1',
  });
  // The answers are documentation addresses (TEST-NET-3), reserved: the server opens them, as it would a LAN.
  dns = new EgressDns(
    () => policy,
    new GuardedResolver({ servers: [upstream.server], allowCidrs: ['203.0.113.0/24'] }),
  );
  port = await dns.listen(0, '127.0.0.1');
});

after(() => {
  dns.close();
  upstream.close();
});

const ask = (name: string, type?: 'A' | 'AAAA' | 'TXT') => queryA({ host: '127.0.0.1', port }, name, type);

test('an allowed name gets the upstream answer', async () => {
  assert.deepEqual(await ask('allowed.test'), { rcode: 'NOERROR', addresses: ['203.0.113.10'] });
  assert.deepEqual(await ask('X.Allowed.Test'), { rcode: 'NOERROR', addresses: ['203.0.113.11'] });
});

test('denied names are NXDOMAIN and the upstream resolver never hears of them', async () => {
  const exfil = 'c2VjcmV0LWRhdGE.denied.test';
  for (const name of ['denied.test', exfil, 'no.allowed.test', 'allowed.test.evil.test'])
    assert.equal((await ask(name)).rcode, 'NXDOMAIN', name);
  assert.equal((await ask(exfil, 'TXT')).rcode, 'NXDOMAIN');
  for (const name of ['denied.test', exfil.toLowerCase(), 'no.allowed.test', 'allowed.test.evil.test'])
    assert.ok(!upstream.queries.map((q) => q.toLowerCase()).includes(name), `${name} was forwarded`);
});

test('only A queries of allowed names go upstream: other types get an empty answer', async () => {
  const before = upstream.queries.length;
  assert.deepEqual(await ask('allowed.test', 'TXT'), { rcode: 'NOERROR', addresses: [] });
  assert.deepEqual(await ask('allowed.test', 'AAAA'), { rcode: 'NOERROR', addresses: [] });
  assert.equal(upstream.queries.length, before);
});

test('an allowed name pointing at a blocked address (loopback) is not handed out', async () => {
  assert.equal((await ask('loop.allowed.test')).rcode, 'NXDOMAIN');
});
