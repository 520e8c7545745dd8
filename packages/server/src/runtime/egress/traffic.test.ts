// The child's traffic events reach the server in order, together: one message for what a short wait collects, at
// once when many wait, and whatever is left when the child flushes on its way out.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, mock, test } from 'node:test';
import type { TrafficEvent } from './protocol.js';
import { profilingFlags } from './supervisor.js';
import { TrafficBatcher } from './traffic.js';

const ev = (n: number): TrafficEvent => ({
  type: 'audit',
  line: {
    source: '10.0.0.2',
    host: `h${n}.test`,
    port: 443,
    mode: 'transparent-tls',
    decision: 'allow',
    rule: '*',
  },
});

beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
afterEach(() => mock.timers.reset());

test('events wait for the timer and go as one message, in order', () => {
  const sent: TrafficEvent[][] = [];
  const b = new TrafficBatcher((e) => sent.push(e), 20, 256);
  b.report(ev(1));
  b.report(ev(2));
  mock.timers.tick(19);
  assert.equal(sent.length, 0);
  b.report(ev(3));
  mock.timers.tick(1);
  assert.deepEqual(sent, [[ev(1), ev(2), ev(3)]]);
  mock.timers.tick(100);
  assert.equal(sent.length, 1, 'nothing queued: nothing sent');
  b.report(ev(4));
  mock.timers.tick(20);
  assert.deepEqual(sent[1], [ev(4)]);
});

test('a full batch goes at once, and a flush sends what waits', () => {
  const sent: TrafficEvent[][] = [];
  const b = new TrafficBatcher((e) => sent.push(e), 20, 3);
  for (let i = 1; i <= 4; i++) b.report(ev(i));
  assert.deepEqual(sent, [[ev(1), ev(2), ev(3)]]);
  b.flush();
  assert.deepEqual(sent[1], [ev(4)]);
  b.flush();
  mock.timers.tick(100);
  assert.equal(sent.length, 2, 'the timer of a flushed batch sends nothing more');
});

test("the server's profiling flags reach the egress child, no other flag does", () => {
  assert.deepEqual(
    profilingFlags([
      '--cpu-prof',
      '--cpu-prof-dir=/tmp/p',
      '--heap-prof-interval=1024',
      '--test',
      '--import',
      'tsx',
      '--cpu-profiler-x',
      '--max-old-space-size=100',
    ]),
    ['--cpu-prof', '--cpu-prof-dir=/tmp/p', '--heap-prof-interval=1024'],
  );
});
