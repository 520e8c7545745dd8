// The server setting that opens private ranges to sandboxes: parsed strictly, normalised for the firewall.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig, parseCidrList, parseRegionAliases, regionNames } from './config.js';

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

test('BERTH_OUTBOUND_ALLOW_CIDRS: IPv4 and IPv6, normalised; the older callback settings add to it', () => {
  assert.deepEqual(loadConfig({}, {}).outboundAllowCidrs, []);
  const cfg = loadConfig(
    {},
    {
      BERTH_OUTBOUND_ALLOW_CIDRS: '127.0.0.0/8, fd12:3456::1/16 ::1',
      BERTH_CALLBACK_ALLOW_CIDRS: '10.1.2.3/8',
    },
  );
  assert.deepEqual(cfg.outboundAllowCidrs, ['127.0.0.0/8', 'fd12::/16', '::1/128', '10.0.0.0/8']);
  assert.deepEqual(loadConfig({}, { BERTH_CALLBACK_ALLOW_PRIVATE: 'true' }).outboundAllowCidrs, [
    '0.0.0.0/0',
    '::/0',
  ]);
  for (const bad of ['fd00::/129', 'fd00::/8/1', 'lan', '::g/64', '10.0.0.0/33'])
    assert.throws(
      () => loadConfig({}, { BERTH_OUTBOUND_ALLOW_CIDRS: bad }),
      /BERTH_OUTBOUND_ALLOW_CIDRS: not an IPv4 or IPv6 CIDR/,
      bad,
    );
  assert.throws(
    () => loadConfig({}, { BERTH_CALLBACK_ALLOW_CIDRS: 'nope' }),
    /BERTH_CALLBACK_ALLOW_CIDRS: not an IPv4 or IPv6 CIDR: nope/,
  );
});

test("BERTH_REGION_ALIASES: by default the service's region names stand for the first region", () => {
  const cfg = loadConfig({}, { BERTH_REGIONS: 'home,lab' });
  assert.deepEqual(cfg.regionAliases, {
    'us-pdx-1': 'home',
    'us-was-1': 'home',
    'eu-lon-1': 'home',
    'eu-dub-1': 'home',
  });
  assert.deepEqual(regionNames(cfg), ['home', 'lab', 'us-pdx-1', 'us-was-1', 'eu-lon-1', 'eu-dub-1']);
  assert.deepEqual(loadConfig({}, { BERTH_REGION_ALIASES: '' }).regionAliases, {});
  assert.deepEqual(loadConfig({}, { BERTH_REGION_ALIASES: 'eu-lon-1=local' }).regionAliases, {
    'eu-lon-1': 'local',
  });
});

test('BERTH_REGION_ALIASES: an alias of a region not served, or not name=region, fails start-up naming it', () => {
  assert.throws(
    () => parseRegionAliases('us-pdx-1=mars', ['local']),
    /BERTH_REGION_ALIASES: us-pdx-1=mars .*BERTH_REGIONS/,
  );
  assert.throws(() => parseRegionAliases('us-pdx-1', ['local']), /expected name=region/);
});

test('BERTH_EGRESS_RESOLVERS and BERTH_EGRESS_GATEWAYS: parsed, absent by default, bad entries named', () => {
  assert.equal(loadConfig({}, {}).egressResolvers, undefined);
  assert.equal(loadConfig({}, {}).egressGateways, undefined);
  const cfg = loadConfig(
    {},
    {
      BERTH_EGRESS_RESOLVERS: '10.0.0.53, 10.0.0.54:5353',
      BERTH_EGRESS_GATEWAYS: 'office=198.51.100.5,198.51.100.6; lab=203.0.113.7',
    },
  );
  assert.deepEqual(cfg.egressResolvers, ['10.0.0.53', '10.0.0.54:5353']);
  assert.deepEqual(cfg.egressGateways, { office: ['198.51.100.5', '198.51.100.6'], lab: ['203.0.113.7'] });
  assert.throws(
    () => loadConfig({}, { BERTH_EGRESS_RESOLVERS: 'dns.example' }),
    /not an IPv4 address\[:port\]: dns\.example/,
  );
  assert.throws(() => loadConfig({}, { BERTH_EGRESS_GATEWAYS: 'Office=1.2.3.4' }), /expected name=addr/);
  assert.throws(
    () => loadConfig({}, { BERTH_EGRESS_GATEWAYS: 'gw=fd00::1' }),
    /not an IPv4 address: fd00::1/,
  );
});

test('BERTH_REPLICA_REMOVE_AFTER: unset by default (the gateway keeps its 5 minutes); a positive integer or start-up fails', () => {
  assert.equal(loadConfig({}, {}).replicaRemoveAfterS, undefined);
  assert.equal(loadConfig({}, { BERTH_REPLICA_REMOVE_AFTER: '2' }).replicaRemoveAfterS, 2);
  assert.throws(() => loadConfig({}, { BERTH_REPLICA_REMOVE_AFTER: '0' }), /BERTH_REPLICA_REMOVE_AFTER/);
  assert.throws(() => loadConfig({}, { BERTH_REPLICA_REMOVE_AFTER: 'soon' }), /BERTH_REPLICA_REMOVE_AFTER/);
});

test('BERTH_REPLICA_RETENTION: four hours by default; 0 removes the last replica as before; else start-up fails', () => {
  assert.equal(loadConfig({}, {}).replicaRetentionS, 4 * 3600);
  assert.equal(loadConfig({}, { BERTH_REPLICA_RETENTION: '0' }).replicaRetentionS, 0);
  assert.equal(loadConfig({}, { BERTH_REPLICA_RETENTION: '600' }).replicaRetentionS, 600);
  assert.throws(() => loadConfig({}, { BERTH_REPLICA_RETENTION: '-1' }), /BERTH_REPLICA_RETENTION/);
  assert.throws(() => loadConfig({}, { BERTH_REPLICA_RETENTION: 'long' }), /BERTH_REPLICA_RETENTION/);
});

test('BERTH_LEADER_CHECK_EVERY: unset by default (the leadership checks each second); positive seconds or start-up fails', () => {
  assert.equal(loadConfig({}, {}).leaderCheckS, undefined);
  assert.equal(loadConfig({}, { BERTH_LEADER_CHECK_EVERY: '600' }).leaderCheckS, 600);
  assert.throws(() => loadConfig({}, { BERTH_LEADER_CHECK_EVERY: '0' }), /BERTH_LEADER_CHECK_EVERY/);
  assert.throws(() => loadConfig({}, { BERTH_LEADER_CHECK_EVERY: 'soon' }), /BERTH_LEADER_CHECK_EVERY/);
});

test('BERTH_BUILDS_AHEAD: on by default; true/false (or 1/0); anything else fails naming it', () => {
  assert.equal(loadConfig({}, {}).buildsAhead, true);
  assert.equal(loadConfig({}, { BERTH_BUILDS_AHEAD: 'false' }).buildsAhead, false);
  assert.equal(loadConfig({}, { BERTH_BUILDS_AHEAD: '1' }).buildsAhead, true);
  assert.equal(loadConfig({}, {}).imagesAhead, true);
  assert.equal(loadConfig({}, { BERTH_IMAGES_AHEAD: 'false' }).imagesAhead, false);
  assert.equal(loadConfig({}, {}).appCopies, true);
  assert.equal(loadConfig({}, { BERTH_APP_COPIES: 'false' }).appCopies, false);
  assert.equal(loadConfig({}, {}).imageCopyWaitS, 30);
  assert.equal(loadConfig({}, { BERTH_IMAGE_COPY_WAIT_S: '0' }).imageCopyWaitS, 0);
  assert.throws(() => loadConfig({}, { BERTH_IMAGE_COPY_WAIT_S: 'soon' }), /BERTH_IMAGE_COPY_WAIT_S/);
  assert.throws(() => loadConfig({}, { BERTH_BUILDS_AHEAD: 'no' }), /BERTH_BUILDS_AHEAD/);
});

test('BERTH_QUOTA_IMAGE_MB: unset leaves the image store its default; a positive number of MB; anything else fails', () => {
  assert.equal(loadConfig({}, {}).imageQuotaMb, undefined);
  assert.equal(loadConfig({}, { BERTH_QUOTA_IMAGE_MB: '512' }).imageQuotaMb, 512);
  assert.throws(() => loadConfig({}, { BERTH_QUOTA_IMAGE_MB: '-1' }), /BERTH_QUOTA_IMAGE_MB/);
});

test('BERTH_SNAPSHOT_MAX_LAYERS: unset leaves 128; 2 to 128 layers; anything else fails', () => {
  assert.equal(loadConfig({}, {}).snapshotMaxLayers, undefined);
  assert.equal(loadConfig({}, { BERTH_SNAPSHOT_MAX_LAYERS: '2' }).snapshotMaxLayers, 2);
  for (const v of ['1', '129', 'x'])
    assert.throws(() => loadConfig({}, { BERTH_SNAPSHOT_MAX_LAYERS: v }), /BERTH_SNAPSHOT_MAX_LAYERS/);
});

test('BERTH_METRICS_TOKEN: unset by default; a short or spaced token fails start-up rather than be guessable', () => {
  assert.equal(loadConfig({}, {}).metricsToken, undefined);
  assert.equal(
    loadConfig({}, { BERTH_METRICS_TOKEN: ' 0123456789abcdef01 ' }).metricsToken,
    '0123456789abcdef01',
  );
  assert.throws(() => loadConfig({}, { BERTH_METRICS_TOKEN: 'short' }), /at least 16 characters/);
  assert.throws(() => loadConfig({}, { BERTH_METRICS_TOKEN: '0123456789 abcdef' }), /without spaces/);
});

test('BERTH_DEEP_STANDBY_DAEMON: swap by default, resident when asked, anything else fails start-up', () => {
  assert.equal(loadConfig({}, {}).deepStandbyDaemon, 'swap');
  assert.equal(loadConfig({}, { BERTH_DEEP_STANDBY_DAEMON: 'resident' }).deepStandbyDaemon, 'resident');
  assert.throws(
    () => loadConfig({}, { BERTH_DEEP_STANDBY_DAEMON: 'keep' }),
    /BERTH_DEEP_STANDBY_DAEMON must be resident or swap/,
  );
});
