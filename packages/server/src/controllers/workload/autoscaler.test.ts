// The KPA decision, with the clock passed in: stable scaling, panic entry at twice the capacity, no scale-down
// while panicking and the exit after a stable window under the threshold, rate limits, the scale-down delay,
// and minScale/maxScale bounds (the cases of Knative's autoscaler_test.go, in small).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide, initialScaleState, PANIC_WINDOW_MS, type Sample, STABLE_WINDOW_MS } from './autoscaler.js';

const spec = { target: 10, minScale: 0, maxScale: 100 };
/** One sample per second over the last `seconds`, each `c` in flight. */
const flat = (now: number, seconds: number, c: number): Sample[] =>
  Array.from({ length: seconds }, (_, i) => ({ timeMs: now - i * 1000, concurrency: c }));

describe('KPA decision', () => {
  it('stable load: desired = ceil(average concurrency / target)', () => {
    const d = decide(spec, flat(100_000, 60, 25), 3, 100_000, initialScaleState());
    assert.equal(d.desired, 3);
    assert.equal(d.panicking, false);
  });

  it('no traffic over the stable window scales to zero when minScale is 0', () => {
    assert.equal(decide(spec, [], 1, 100_000, initialScaleState()).desired, 0);
    assert.equal(decide({ ...spec, minScale: 2 }, [], 1, 100_000, initialScaleState()).desired, 2);
  });

  it('a burst of twice the ready capacity in the panic window enters panic and scales on the panic average', () => {
    const now = 100_000;
    const samples = [...flat(now - PANIC_WINDOW_MS, 54, 10), ...flat(now, 6, 50)];
    const d = decide(spec, samples, 1, now, initialScaleState());
    assert.equal(d.panicking, true);
    assert.equal(d.desired, 5, 'the panic window asks for 5, the stable one for fewer');
  });

  it('no scale-down while panicking, and panic ends a stable window after the last time over the threshold', () => {
    let now = 100_000;
    let d = decide(spec, flat(now, 6, 60), 1, now, initialScaleState());
    assert.equal(d.desired, 6);
    now += 10_000;
    d = decide(spec, flat(now, 6, 10), 6, now, d.state);
    assert.equal(d.panicking, true);
    assert.equal(d.desired, 6, 'kept at the panic maximum');
    now += STABLE_WINDOW_MS;
    d = decide(spec, flat(now, 60, 10), 6, now, d.state);
    assert.equal(d.panicking, false);
    assert.equal(d.desired, 3, 'down by at most half per decision (rate 2)');
  });

  it('scale-down rate: at most half the ready replicas go per decision', () => {
    assert.equal(decide(spec, flat(100_000, 60, 1), 10, 100_000, initialScaleState()).desired, 5);
  });

  it('scale-down delay holds the largest desired count of its window', () => {
    let now = 100_000;
    const s = { ...spec, scaleDownDelayMs: 30_000 };
    let d = decide(s, flat(now, 60, 40), 4, now, initialScaleState());
    assert.equal(d.desired, 4);
    now += 2_000;
    d = decide(s, [], 4, now, d.state);
    assert.equal(d.desired, 4, 'the drop to 2 waits');
    now += 31_000;
    d = decide(s, [], 4, now, d.state);
    assert.equal(d.desired, 2);
  });

  it('maxScale bounds the count', () => {
    assert.equal(
      decide({ ...spec, maxScale: 3 }, flat(100_000, 60, 500), 3, 100_000, initialScaleState()).desired,
      3,
    );
  });
});
