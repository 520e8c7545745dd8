// The soak's verdict (soak.ts) on made-up curves: a leak, however slow, fails it; a burst does not.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Sample } from './harness.js';
import { judgeSoak } from './soak.js';

/** An hour sampled every 10 s, flat at the figures of a warm server, with `change` applied to each sample. */
const run = (change: (s: Sample, i: number) => void = () => undefined): Sample[] =>
  Array.from({ length: 360 }, (_, i) => {
    const s = {
      atS: i * 10,
      rssMb: 210,
      fds: 70,
      timers: 10,
      storeMb: 5,
      instances: 7,
      hostAvailableMb: 20_000,
    };
    change(s, i);
    return s;
  });

test('a steady server passes, and its figures are reported', () => {
  const v = judgeSoak(run(), 300);
  assert.deepEqual(v.violations, []);
  assert.equal(v.base.rssMb, 210);
  assert.equal(v.end.fds, 70);
});

test('a slow leak (0.5 MB per sample, 180 MB an hour) fails on RSS', () => {
  const v = judgeSoak(
    run((s, i) => {
      s.rssMb += i * 0.5;
    }),
    300,
  );
  assert.match(v.violations.join('\n'), /rssMb grew from/);
});

test('descriptors that keep growing fail, a burst of them and a minute of scaled-up replicas do not', () => {
  const burst = judgeSoak(
    run((s, i) => {
      if (i === 200) s.fds = 154;
      if (i >= 150 && i < 156) s.instances = 12;
    }),
    300,
  );
  assert.deepEqual(burst.violations, []);
  assert.equal(burst.peak.fds, 154, 'the peak is reported');
  const leak = judgeSoak(
    run((s, i) => {
      s.fds += Math.floor(i / 4);
    }),
    300,
  );
  assert.match(leak.violations.join('\n'), /fds grew from/);
});

test("the host's memory is judged only when the run has the host", () => {
  const falling = run((s, i) => {
    s.hostAvailableMb -= i * 10;
  });
  assert.match(judgeSoak(falling, 300).violations.join('\n'), /available memory fell/);
  assert.deepEqual(judgeSoak(falling, 300, false).violations, []);
});

test('too short a run is a violation, not a pass', () => {
  assert.match(judgeSoak(run().slice(0, 35), 300).violations.join('\n'), /too few samples/);
});
