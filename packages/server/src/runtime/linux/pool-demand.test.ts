// The warm pool's size follows the recent create rate, between its base and its ceiling.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEMAND_WINDOW_MS, PoolDemand } from './pool-demand.js';

test('the pool grows with the creates of the last window, up to its ceiling, and shrinks back once they age out', () => {
  const d = new PoolDemand(2, 16);
  assert.equal(d.target(0), 2, 'at rest: the base size');
  for (let i = 0; i < 5; i++) d.record(i * 1000);
  assert.equal(d.target(5000), 7, 'five creates in the window ask for five ready, the base on top');
  for (let i = 0; i < 30; i++) d.record(6000 + i);
  assert.equal(d.target(6100), 16, 'never past the ceiling');
  assert.equal(d.target(6030 + DEMAND_WINDOW_MS + 1), 2, 'a quiet window brings it back to the base');
});

test('a pool that is off stays off, whatever the demand', () => {
  const d = new PoolDemand(0, 16);
  for (let i = 0; i < 10; i++) d.record(i);
  assert.equal(d.target(10), 0);
});

test('a burst as large as the last window finds the whole of it ready, the base left over', () => {
  // The bench's shape: 21 creates in the last minute, then 20 back to back. Each create takes its sandbox before the
  // refill that replaces it, and the burst defers refills: a pool of exactly 21 entered it with 19.
  const d = new PoolDemand(2, 24);
  for (let i = 0; i < 21; i++) d.record(i * 1000);
  const target = d.target(21_000);
  assert.equal(target, 23);
  assert.ok(target - 1 - 20 >= 1, 'after the take of the 21st create and a burst of 20, one is still ready');
});
