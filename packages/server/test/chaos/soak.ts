// The soak's bounds (decision 050): after warm-up, none of the server's resources nor the host's may grow past the
// figure at the end of warm-up by more than a stated margin, whatever the run's length. A leak that adds a little
// with every request crosses the margin within the hour of the benchmark; the short run in the suite checks that
// the mixed load, once warm, does not grow at all beyond them.
import type { Sample } from './harness.js';

/** How far past its warm-up figure each figure may go. */
export const SOAK_MARGIN = {
  rssMb: 96,
  fds: 64,
  timers: 200,
  storeMb: 32,
  instances: 2,
  /** The host's available memory may fall by at most this much. */
  hostAvailableMb: 512,
};

export interface SoakVerdict {
  warmupS: number;
  base?: Sample;
  peak: Partial<Record<keyof typeof SOAK_MARGIN, number>>;
  violations: string[];
}

/**
 * The samples after `warmupS` against the last sample of warm-up. The host's memory is judged only when the run has
 * the host to itself (`host`): in the suite, other test files run beside it and fill sandboxes of their own.
 */
export function judgeSoak(samples: Sample[], warmupS: number, host = true): SoakVerdict {
  const before = samples.filter((x) => x.atS <= warmupS);
  const after = samples.filter((x) => x.atS > warmupS);
  const v: SoakVerdict = { warmupS, base: before.at(-1), peak: {}, violations: [] };
  if (!v.base || !after.length) {
    v.violations.push(`too few samples: ${before.length} in warm-up, ${after.length} after`);
    return v;
  }
  const base = v.base;
  for (const key of ['rssMb', 'fds', 'timers', 'storeMb', 'instances'] as const) {
    const values = after.map((x) => x[key]).filter((n): n is number => n !== undefined);
    if (!values.length || base[key] === undefined) continue;
    const peak = Math.max(...values);
    v.peak[key] = peak;
    if (peak > base[key] + SOAK_MARGIN[key])
      v.violations.push(
        `${key} grew from ${base[key].toFixed(1)} to ${peak.toFixed(1)} (margin ${SOAK_MARGIN[key]})`,
      );
  }
  const low = Math.min(...after.map((x) => x.hostAvailableMb));
  v.peak.hostAvailableMb = low;
  if (host && low < base.hostAvailableMb - SOAK_MARGIN.hostAvailableMb)
    v.violations.push(
      `the host's available memory fell from ${base.hostAvailableMb.toFixed(0)} MB to ${low.toFixed(0)} MB (margin ${SOAK_MARGIN.hostAvailableMb})`,
    );
  return v;
}
