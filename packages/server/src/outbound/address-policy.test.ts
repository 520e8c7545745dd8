// The address policy over every reserved range and every spelling of an address a URL or a resolver can give:
// closed by default, opened by a listed range, loopback only when listed itself, the host's own never.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AddressPolicy } from './address-policy.js';
import { Outbound } from './outbound.js';
import { RESERVED_V4, RESERVED_V6 } from './reserved-ranges.js';

const HOST = '192.0.2.2'; // stands for this host's LAN address (injected: the test does not depend on the machine)
const HOST_V6 = 'fd00::2';
const interfaces = () => ['127.0.0.1', '::1', HOST, HOST_V6, 'fe80::fc:ff:fe00:1'];
const policy = (allowCidrs: string[] = [], loopback: 'when-listed' | 'never' = 'when-listed') =>
  new AddressPolicy({ allowCidrs, loopback, interfaces, hostRanges: ['10.200.0.0/16'] });
const closed = (p: AddressPolicy, a: string) => {
  const v = p.judge(a);
  return v.open ? undefined : v.class;
};

/** First, an inside and the last address of an IPv4 CIDR. */
function samplesV4(cidr: string): string[] {
  const [a, bits] = cidr.split('/');
  const base = a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
  const size = 2 ** (32 - Number(bits));
  const ip = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
  return [ip(base), ip(base + Math.floor(size / 2)), ip(base + size - 1)];
}

describe('address policy', () => {
  it('closes every IANA special-purpose IPv4 range (first, middle, last address) and multicast', () => {
    const p = policy();
    for (const r of RESERVED_V4)
      for (const a of samplesV4(r.cidr)) assert.ok(closed(p, a), `${a} (${r.cidr} ${r.what})`);
    for (const a of [
      '192.0.2.1',
      '192.88.99.1',
      '198.18.0.1',
      '198.19.255.254',
      '198.51.100.7',
      '203.0.113.7',
    ])
      assert.equal(closed(p, a), 'reserved', a);
    for (const a of ['255.255.255.255', '224.0.0.1', '239.255.255.250', '100.127.255.255'])
      assert.equal(closed(p, a), 'reserved', a);
  });

  it('closes every IPv6 special-purpose range, and judges mapped, NAT64 and 6to4 addresses by their IPv4', () => {
    const p = policy();
    for (const r of RESERVED_V6) assert.ok(closed(p, r.cidr.split('/')[0].replace(/::$/, '::1')), r.cidr);
    for (const a of [
      '2001:db8::1',
      '2001::1', // Teredo
      '2001:2::1', // benchmarking
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      'fe80::1%eth0',
      'fec0::1',
      'ff02::1',
      '100::1',
      '64:ff9b:1::1',
      '3fff::1',
      '5f00::1',
      '::ffff:0:a01:203', // IPv4-translated
      '::7f00:1', // IPv4-compatible
    ])
      assert.equal(closed(p, a), 'reserved', a);
    // Carriers of an IPv4 address: as closed as the address they carry, as open as it when it is public.
    for (const a of [
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '[::ffff:127.0.0.1]',
      '64:ff9b::7f00:1',
      '2002:7f00:1::1',
    ])
      assert.equal(closed(p, a), 'loopback', a);
    for (const a of ['::ffff:10.1.2.3', '64:ff9b::a9fe:a9fe', '2002:c0a8:101::1', '::ffff:192.0.2.7'])
      assert.equal(closed(p, a), 'reserved', a);
    for (const a of ['::ffff:93.184.215.14', '64:ff9b::808:808', '2002:5db8:d70e::1', '2606:4700::1111'])
      assert.equal(closed(p, a), undefined, a);
  });

  it("lists IPv4 ranges sorted and without overlaps: the sandboxes' nftables interval set refuses overlaps", () => {
    const span = (cidr: string) => {
      const [a, bits] = cidr.split('/');
      const base = a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
      return [base, base + 2 ** (32 - Number(bits)) - 1];
    };
    const spans = RESERVED_V4.map((r) => span(r.cidr));
    for (let i = 1; i < spans.length; i++)
      assert.ok(spans[i][0] > spans[i - 1][1], `${RESERVED_V4[i].cidr} after ${RESERVED_V4[i - 1].cidr}`);
    for (const r of RESERVED_V4)
      assert.equal(span(r.cidr)[0] % 2 ** (32 - Number(r.cidr.split('/')[1])), 0, r.cidr);
  });

  it('leaves public addresses open', () => {
    const p = policy();
    for (const a of [
      '93.184.215.14',
      '8.8.8.8',
      '1.1.1.1',
      '172.32.0.1',
      '100.128.0.1',
      '192.0.3.1',
      '2a00:1450::1',
    ])
      assert.equal(closed(p, a), undefined, a);
  });

  it('a listed range opens the reserved addresses it covers, and nothing else', () => {
    const p = policy(['10.0.0.0/8', 'fd00::/8', '192.0.2.0/24']);
    assert.equal(closed(p, '10.1.2.3'), undefined);
    assert.equal(closed(p, '::ffff:10.1.2.3'), undefined, 'a mapped address follows its IPv4');
    assert.equal(closed(p, 'fd12::1'), undefined);
    assert.equal(closed(p, '192.0.2.7'), undefined);
    assert.equal(closed(p, '192.168.1.1'), 'reserved');
    assert.equal(closed(p, 'fc00::1'), 'reserved');
  });

  it("the host's own addresses stay closed whatever is listed; the runtime's ranges too", () => {
    const every = policy(['0.0.0.0/0', '::/0']);
    for (const a of [
      HOST,
      `::ffff:${HOST}`,
      HOST_V6,
      'fe80::fc:ff:fe00:1',
      '10.200.0.2',
      '0.0.0.0',
      '0.1.2.3',
      '::',
    ])
      assert.equal(closed(every, a), 'host', a);
    assert.equal(closed(policy(['192.0.2.0/24']), HOST), 'host', 'a LAN opened does not open the host in it');
    assert.equal(closed(every, '192.0.2.3'), undefined, 'another address of that LAN does open');
  });

  it('loopback opens only when a range inside it is listed, and never under loopback: never', () => {
    const every = policy(['0.0.0.0/0', '::/0']);
    for (const a of ['127.0.0.1', '127.255.0.9', '::1', '::ffff:127.0.0.1'])
      assert.equal(closed(every, a), 'loopback', `${a}: 0.0.0.0/0 does not name loopback`);
    const listed = policy(['127.0.0.0/8']);
    for (const a of ['127.0.0.1', '127.0.0.2', '::ffff:127.0.0.1', '64:ff9b::7f00:1'])
      assert.equal(closed(listed, a), undefined, a);
    assert.equal(closed(listed, '::1'), 'loopback', 'IPv6 loopback is listed apart');
    assert.equal(closed(policy(['::1']), '::1'), undefined);
    const one = policy(['127.0.0.1/32']);
    assert.equal(closed(one, '127.0.0.1'), undefined);
    assert.equal(closed(one, '127.0.0.2'), 'loopback');
    assert.equal(closed(policy(['127.0.0.0/8'], 'never'), '127.0.0.1'), 'loopback');
  });

  it('judges every spelling a URL may give a loopback host: decimal, hex, octal, short, bracketed, named', async () => {
    const strict = new Outbound({ allowCidrs: [], interfaces, lookup: async () => assert.fail('no lookup') });
    for (const url of [
      'http://127.0.0.1:9/x',
      'http://127.1:9/x',
      'http://2130706433:9/x',
      'http://0x7f.1:9/x',
      'http://0x7f000001/x',
      'http://0177.0.0.1/x',
      'http://[::ffff:127.0.0.1]:9/x',
      'http://[::ffff:7f00:1]/x',
      'http://[0:0:0:0:0:ffff:127.0.0.1]/x',
      'http://[::1]/x',
      'http://localhost:9/x',
      'http://LOCALHOST./x',
      'http://api.localhost/x',
      'http://evil.example@127.0.0.1:9/x',
      'http://127.0.0.1:9#@evil.example/x',
      'http://0.0.0.0:9/x',
      'http://[::]:9/x',
      `http://${HOST}/x`,
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00::1]/x',
    ]) {
      const issue = await strict.urlIssue(url, '/spec/url');
      assert.ok(issue, url);
      assert.equal(issue.pointer, '/spec/url');
      assert.match(issue.message, /never opened|BERTH_OUTBOUND_ALLOW_CIDRS/, url);
    }
    assert.match(
      (await strict.urlIssue('http://127.0.0.1/x', '/p'))?.message ?? '',
      /BERTH_OUTBOUND_ALLOW_CIDRS=127\.0\.0\.0\/8 opens it/,
    );
    assert.match((await strict.urlIssue('ftp://example.com/x', '/p'))?.message ?? '', /http or https/);
    assert.match((await strict.urlIssue('not a url', '/p'))?.message ?? '', /absolute http or https URL/);
  });

  it('resolves names at write time: a name answering a closed address is refused, one not resolving passes', async () => {
    const o = new Outbound({
      allowCidrs: [],
      interfaces,
      lookup: async (h) => {
        if (h === 'public.example') return ['93.184.215.14'];
        if (h === 'split.example') return ['93.184.215.14', '10.0.0.5'];
        if (h === 'host.example') return [HOST];
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${h}`), { code: 'ENOTFOUND' });
      },
    });
    assert.equal(await o.urlIssue('https://public.example/v1', '/p'), undefined);
    assert.match(
      (await o.urlIssue('https://split.example/v1', '/p'))?.message ?? '',
      /resolves to 10\.0\.0\.5/,
    );
    assert.match((await o.urlIssue('https://host.example/v1', '/p'))?.message ?? '', /never opened/);
    assert.equal(await o.urlIssue('https://gone.example/v1', '/p'), undefined);
    await assert.rejects(o.vet('gone.example'), /ENOTFOUND/);
    assert.deepEqual(await o.vet('public.example'), ['93.184.215.14']);
  });
});
