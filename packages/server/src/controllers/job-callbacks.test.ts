// Callback targets: private, loopback, link-local and reserved addresses are refused unless a range is opened.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callbackBlockList } from './job-callbacks.js';

test('callback targets in private or reserved ranges are refused, public ones and opened ranges allowed', () => {
  const blocked = callbackBlockList([]);
  for (const a of ['127.0.0.1', '10.1.2.3', '192.168.1.1', '169.254.169.254', '172.20.0.1', '::1', 'fd00::1'])
    assert.equal(blocked(a), true, a);
  for (const a of ['93.184.216.34', '2606:4700::1111']) assert.equal(blocked(a), false, a);
  const opened = callbackBlockList(['127.0.0.1/32']);
  assert.equal(opened('127.0.0.1'), false);
  assert.equal(opened('127.0.0.2'), true);
});
