// The server setting that opens private ranges to sandboxes: parsed strictly, normalised for the firewall.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, parseCidrList } from './config.js';

test('BERTH_SANDBOX_ALLOW_CIDRS: empty by default; entries normalised; a bare address is a /32', () => {
  assert.deepEqual(loadConfig({}, {}).sandboxAllowCidrs, []);
  const cfg = loadConfig({}, { BERTH_SANDBOX_ALLOW_CIDRS: '192.168.1.77/24, 10.0.5.7 ,100.64.0.0/10' });
  assert.deepEqual(cfg.sandboxAllowCidrs, ['192.168.1.0/24', '10.0.5.7/32', '100.64.0.0/10']);
  assert.deepEqual(parseCidrList('0.0.0.0/0'), ['0.0.0.0/0']);
});

test('BERTH_SANDBOX_ALLOW_CIDRS: anything but IPv4 CIDRs fails start-up naming the entry', () => {
  for (const bad of ['192.168.1.0/33', '256.1.1.1', 'lan', '10.0.0.0/8;drop', 'fd00::/8'])
    assert.throws(
      () => parseCidrList(bad),
      new RegExp(`not an IPv4 CIDR: ${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`),
    );
});
