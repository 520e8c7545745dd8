import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { type BudgetPolicy, IN_FLIGHT_RETRY_S, TokenBudget, windowAt } from './token-budget.js';

const HOUR = 3_600_000;
const T0 = Date.UTC(2025, 0, 15, 10, 0, 0);

const policy = (
  limits: BudgetPolicy['limits'],
  granularity: BudgetPolicy['granularity'] = 'hour',
  step = 1,
): BudgetPolicy => ({
  id: 'default\u0000p',
  workspace: 'default',
  name: 'p',
  granularity,
  step,
  limits,
});

test('reservations never exceed an output limit, whatever their sizes and order', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 400 }), { maxLength: 200 }),
      fc.integer({ min: 1, max: 5000 }),
      (asks, limit) => {
        const b = new TokenBudget(() => T0);
        const p = policy({ output: limit });
        let granted = 0;
        for (const a of asks) {
          const r = b.reserve([p], { input: 0, output: a });
          if (r.ok) granted += a;
        }
        assert.ok(granted <= limit);
        const [w] = b.snapshot(p);
        assert.equal(w.reserved.output, granted);
      },
    ),
  );
});

test('refused only because of reservations in flight: retry in a second, not at the window end', () => {
  const b = new TokenBudget(() => T0 + 15 * 60_000);
  const p = policy({ output: 1000 });
  const results = Array.from({ length: 100 }, () => b.reserve([p], { input: 10, output: 50 }));
  assert.equal(results.filter((r) => r.ok).length, 20);
  const denied = results.find((r) => !r.ok);
  assert.ok(denied && !denied.ok);
  assert.equal(denied.inFlight, true);
  assert.equal(denied.retryAfterS, IN_FLIGHT_RETRY_S);
  assert.equal(denied.never, false);
});

test('refused because the window is used up: retry when the window ends', () => {
  const b = new TokenBudget(() => T0 + 15 * 60_000);
  const p = policy({ output: 1000 });
  const r = b.reserve([p], { input: 0, output: 990 });
  assert.ok(r.ok);
  b.settle(r.reservation, { input: 0, output: 990 });
  const denied = b.reserve([p], { input: 0, output: 50 });
  assert.ok(!denied.ok);
  assert.equal(denied.inFlight, false);
  assert.equal(denied.retryAfterS, 45 * 60, 'seconds until the hour window ends');
});

test('settling with the real usage frees what was reserved but not used', () => {
  const b = new TokenBudget(() => T0);
  const p = policy({ output: 100 });
  const r1 = b.reserve([p], { input: 0, output: 80 });
  assert.ok(r1.ok);
  assert.equal(b.reserve([p], { input: 0, output: 30 }).ok, false);
  b.settle(r1.reservation, { input: 5, output: 20 });
  b.settle(r1.reservation, { input: 5, output: 20 }); // idempotent
  const [w] = b.snapshot(p);
  assert.deepEqual(w.used, { input: 5, output: 20 });
  assert.deepEqual(w.reserved, { input: 0, output: 0 });
  assert.equal(b.reserve([p], { input: 0, output: 80 }).ok, true);
});

test('the window frees when the clock passes its end', () => {
  let now = T0 + 59 * 60_000;
  const b = new TokenBudget(() => now);
  const p = policy({ total: 100 });
  const r = b.reserve([p], { input: 40, output: 60 });
  assert.ok(r.ok);
  b.settle(r.reservation, { input: 40, output: 60 });
  const denied = b.reserve([p], { input: 1, output: 0 });
  assert.ok(!denied.ok);
  assert.equal(denied.retryAfterS, 60);
  now = T0 + HOUR;
  assert.equal(b.reserve([p], { input: 1, output: 0 }).ok, true);
  assert.equal(b.snapshot(p).length, 1, 'the ended window is forgotten');
});

test('a request larger than the limit is flagged as never fitting', () => {
  const b = new TokenBudget(() => T0);
  const r = b.reserve([policy({ output: 1000 })], { input: 0, output: 4096 });
  assert.ok(!r.ok);
  assert.equal(r.never, true);
  assert.equal(r.dimension, 'output');
});

test('several policies are reserved all or nothing', () => {
  const b = new TokenBudget(() => T0);
  const a = { ...policy({ output: 100 }), id: 'ws\u0000a', name: 'a' };
  const m = { ...policy({ input: 10 }, 'minute'), id: 'ws\u0000m', name: 'm' };
  const r = b.reserve([a, m], { input: 20, output: 5 });
  assert.ok(!r.ok);
  assert.equal(r.policy, 'm');
  assert.equal(b.snapshot(a)[0].reserved.output, 0, 'nothing was held in the first policy');
});

test('windows: step multiplies the unit; months follow the calendar', () => {
  assert.deepEqual(windowAt('minute', 5, Date.UTC(2025, 0, 1, 0, 7, 30)), {
    start: Date.UTC(2025, 0, 1, 0, 5),
    end: Date.UTC(2025, 0, 1, 0, 10),
  });
  assert.deepEqual(windowAt('month', 1, Date.UTC(2024, 1, 29, 12)), {
    start: Date.UTC(2024, 1, 1),
    end: Date.UTC(2024, 2, 1),
  });
  assert.deepEqual(windowAt('month', 3, Date.UTC(2024, 11, 5)), {
    start: Date.UTC(2024, 9, 1),
    end: Date.UTC(2025, 0, 1),
  });
  assert.deepEqual(windowAt('day', 1, Date.UTC(2024, 5, 3, 23, 59)), {
    start: Date.UTC(2024, 5, 3),
    end: Date.UTC(2024, 5, 4),
  });
});

test('a window that ended with a call still in flight is charged when the call settles', () => {
  let now = T0 + HOUR - 1000;
  const b = new TokenBudget(() => now);
  const p = policy({ output: 100 });
  const r = b.reserve([p], { input: 0, output: 50 });
  assert.ok(r.ok);
  now = T0 + HOUR + 1000;
  const windows = b.snapshot(p);
  assert.equal(windows.length, 2, 'the old window is kept while it holds a reservation');
  b.settle(r.reservation, { input: 0, output: 40 });
  assert.equal(b.snapshot(p).length, 1);
  assert.equal(b.reserve([p], { input: 0, output: 100 }).ok, true, 'the new window is untouched');
});

test('the output room is the least any output or total limit leaves beside the call’s input', () => {
  const b = new TokenBudget(() => T0);
  const out = { ...policy({ output: 1000 }), id: 'default\u0000out', name: 'out' };
  const all = { ...policy({ total: 2000 }), id: 'default\u0000all', name: 'all' };
  const inputOnly = { ...policy({ input: 10 }), id: 'default\u0000in', name: 'in' };
  assert.equal(b.outputRoom([inputOnly], 5), Number.POSITIVE_INFINITY, 'nothing limits output');
  assert.equal(b.outputRoom([out, all], 100), 1000);
  const r = b.reserve([out, all], { input: 100, output: 900 });
  assert.ok(r.ok);
  assert.equal(b.outputRoom([out, all], 100), 100);
  b.settle(r.reservation, { input: 1500, output: 50 });
  assert.equal(b.outputRoom([out, all], 100), 350, 'total 2000 - 1550 used - 100 input');
  assert.equal(b.outputRoom([out, all], 900), 0, 'never negative');
  const granted = b.reserve([out, all], { input: 100, output: b.outputRoom([out, all], 100) });
  assert.ok(granted.ok, 'reserving the room is granted');
});
