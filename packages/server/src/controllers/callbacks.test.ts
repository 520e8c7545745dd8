// Callback targets: private, loopback, link-local (cloud metadata), CGNAT and reserved addresses are refused unless
// a range is opened (BERTH_CALLBACK_ALLOW_CIDRS, or everything with the older BERTH_CALLBACK_ALLOW_PRIVATE).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALLOW_EVERY_RANGE } from '../config.js';
import { callbackBlockList, callbackRefusal } from './callbacks.js';

test('callback targets in private or reserved ranges are refused, public ones and opened ranges allowed', () => {
  const blocked = callbackBlockList([]);
  for (const a of [
    '127.0.0.1',
    '10.1.2.3',
    '192.168.1.1',
    '169.254.169.254',
    '172.20.0.1',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    'fd00::1',
    'fe80::1',
    '::ffff:127.0.0.1',
  ])
    assert.equal(blocked(a), true, a);
  for (const a of ['93.184.216.34', '172.32.0.1', '2606:4700::1111']) assert.equal(blocked(a), false, a);
  const opened = callbackBlockList(['127.0.0.1/32']);
  assert.equal(opened('127.0.0.1'), false);
  assert.equal(opened('127.0.0.2'), true);
  const all = callbackBlockList(ALLOW_EVERY_RANGE);
  for (const a of ['127.0.0.1', '10.0.0.8', '::1', 'fd00::1']) assert.equal(all(a), false, a);
});

test('refuses a callback URL resolving to loopback, metadata or a private range; allows it when opened', async () => {
  const strict = callbackBlockList([]);
  for (const url of [
    'http://127.0.0.1:9/cb',
    'http://169.254.169.254/latest',
    'http://10.0.0.1/x',
    'http://localhost/x',
  ])
    assert.match(String(await callbackRefusal(url, strict)), /private|loopback|link-local/, url);
  assert.match(String(await callbackRefusal('ftp://example.com/x', strict)), /http or https/);
  assert.equal(
    await callbackRefusal('http://127.0.0.1:9/cb', callbackBlockList(ALLOW_EVERY_RANGE)),
    undefined,
  );
});
