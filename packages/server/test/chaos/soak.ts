// The soak's bounds (decision 050): after warm-up, none of the server's resources nor the host's may grow past where
// it stood just after warm-up by more than a stated margin, whatever the run's length. Growth is judged on what is
// sustained, the median of the run's last window against the median of its first window after warm-up: a leak that
// adds a little with every request moves the whole last window and crosses the margin within the hour of the
// benchmark, while a burst (an agent scaled up for a minute, descriptors of a wave of concurrent requests) moves one
// sample. Each figure's peak is reported beside it. The short run in the suite checks that the mixed load, once warm,
// does not grow beyond them.
import type { Sample } from './harness.js';

/** How far past its figure just after warm-up each figure may end. */
export const SOAK_MARGIN = {
  rssMb: 96,
  fds: 64,
  timers: 200,
  storeMb: 32,
  instances: 2,
  /** The host's available memory may fall by at most this much. */
  hostAvailableMb: 512,
};

type Figure = keyof typeof SOAK_MARGIN;

export interface SoakVerdict {
  warmupS: number;
  /** The median of the first window after warm-up. */
  base: Partial<Record<Figure, number>>;
  /** The median of the last window. */
  end: Partial<Record<Figure, number>>;
  /** The highest sample after warm-up (the lowest, for the host's available memory). */
  peak: Partial<Record<Figure, number>>;
  violations: string[];
}

/** Samples per window: a tenth of the run after warm-up, at least 5 (the suite's short run samples each second). */
const windowOf = (n: number) => Math.max(5, Math.floor(n / 10));

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * The samples after `warmupS`: the last window against the first. The host's memory is judged only when the run has
 * the host to itself (`host`): in the suite, other test files run beside it and fill sandboxes of their own.
 */
export function judgeSoak(samples: Sample[], warmupS: number, host = true): SoakVerdict {
  const after = samples.filter((x) => x.atS > warmupS);
  const v: SoakVerdict = { warmupS, base: {}, end: {}, peak: {}, violations: [] };
  const n = windowOf(after.length);
  if (after.length < 2 * n) {
    v.violations.push(`too few samples after warm-up: ${after.length}, ${2 * n} needed`);
    return v;
  }
  for (const key of ['rssMb', 'fds', 'timers', 'storeMb', 'instances', 'hostAvailableMb'] as const) {
    const values = after.map((x) => x[key]).filter((x): x is number => x !== undefined);
    if (values.length < 2 * n) continue;
    const base = median(values.slice(0, n));
    const end = median(values.slice(-n));
    v.base[key] = base;
    v.end[key] = end;
    if (key === 'hostAvailableMb') {
      v.peak[key] = Math.min(...values);
      if (host && end < base - SOAK_MARGIN[key])
        v.violations.push(
          `the host's available memory fell from ${base.toFixed(0)} MB to ${end.toFixed(0)} MB (margin ${SOAK_MARGIN[key]})`,
        );
    } else {
      v.peak[key] = Math.max(...values);
      if (end > base + SOAK_MARGIN[key])
        v.violations.push(
          `${key} grew from ${base.toFixed(1)} to ${end.toFixed(1)} (margin ${SOAK_MARGIN[key]})`,
        );
    }
  }
  return v;
}
