// The idle limit and the hard cap of a request, with the clock and the socket's byte counters in the test's hands:
// every byte either way restarts the idle limit; the cap cuts a request that never goes quiet; a cut says why.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../errors.js';
import { RequestDeadlines } from './request-deadlines.js';

function setup(idleMs = 1000) {
  const clock = { now: 0 };
  const socket = { bytesRead: 100, bytesWritten: 0 };
  const d = new RequestDeadlines({ idleMs, now: () => clock.now });
  return { clock, socket, d };
}

test('a request with no byte either way for the idle limit is cut with a 504 saying so', () => {
  const { clock, socket, d } = setup();
  const w = d.watch(socket);
  clock.now = 999;
  d.check();
  assert.equal(w.cut.aborted, false);
  clock.now = 1000;
  d.check();
  assert.equal(w.cut.aborted, true);
  const why = w.cut.reason as ApiError;
  assert.ok(why instanceof ApiError);
  assert.equal(why.status, 504);
  assert.match(why.message, /no byte in either direction for 1 s/);
  assert.equal(d.size, 0);
  d.stop();
});

test('every byte read or written restarts the idle limit', () => {
  const { clock, socket, d } = setup();
  const w = d.watch(socket);
  for (let i = 1; i <= 10; i++) {
    clock.now = i * 900;
    if (i % 2) socket.bytesWritten += 1;
    else socket.bytesRead += 1;
    d.check();
  }
  assert.equal(w.cut.aborted, false, '9 s of traffic, never 1 s quiet');
  clock.now += 1000;
  d.check();
  assert.equal(w.cut.aborted, true);
  d.stop();
});

test('runtime.timeout cuts a request that never goes quiet', () => {
  const { clock, socket, d } = setup();
  const w = d.watch(socket, 3);
  const other = d.watch({ bytesRead: 0, bytesWritten: 0 });
  other.done();
  for (let t = 500; t < 3000; t += 500) {
    clock.now = t;
    socket.bytesWritten++;
    d.check();
  }
  assert.equal(w.cut.aborted, false);
  clock.now = 3000;
  socket.bytesWritten++;
  d.check();
  assert.equal(w.cut.aborted, true);
  assert.match((w.cut.reason as Error).message, /limit of 3 s \(spec\.runtime\.timeout\)/);
  d.stop();
});

test('a request that ended is no longer watched and never cut', () => {
  const { clock, socket, d } = setup();
  const w = d.watch(socket, 1);
  w.done();
  clock.now = 10_000;
  d.check();
  assert.equal(w.cut.aborted, false);
  assert.equal(d.size, 0);
});
