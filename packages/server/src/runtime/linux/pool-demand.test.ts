// The warm pool's size follows the recent create rate, between its base and its ceiling.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEMAND_WINDOW_MS, PoolDemand } from './pool-demand.js';

test('the pool grows with the creates of the last window, up to its ceiling, and shrinks back once they age out', () => {
  const d = new PoolDemand(2, 16);
  assert.equal(d.target(0), 2, 'at rest: the base size');
  for (let i = 0; i < 5; i++) d.record(i * 1000);
  assert.equal(d.target(5000), 5, 'five creates in the window ask for five ready');
  for (let i = 0; i < 30; i++) d.record(6000 + i);
  assert.equal(d.target(6100), 16, 'never past the ceiling');
  assert.equal(d.target(6030 + DEMAND_WINDOW_MS + 1), 2, 'a quiet window brings it back to the base');
});

test('a pool that is off stays off, whatever the demand', () => {
  const d = new PoolDemand(0, 16);
  for (let i = 0; i < 10; i++) d.record(i);
  assert.equal(d.target(10), 0);
});
