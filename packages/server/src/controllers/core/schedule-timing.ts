// When a sandbox schedule fires, as pure functions of the entry and a time: the service's three timing types, a
// 5-field cron expression (UTC), an absolute `at` (RFC 3339), and a relative `sleep` resolved to an `at` on create.
import { Cron } from 'croner';
import { durationMs, isIsoDate } from '../../kinds/rules.js';

/** What is stored: `sleep` never is, it became an `at`. */
export type StoredTiming = { type: 'cron' | 'at'; value: string };

export type TimingCheck = { ok: true; timing: StoredTiming } | { ok: false; reason: string };

const CRON_FIELDS = 5;

/** Checks a timing as written and resolves `sleep` against `nowMs`. */
export function resolveTiming(type: unknown, value: unknown, nowMs: number): TimingCheck {
  if (typeof value !== 'string' || !value.trim())
    return { ok: false, reason: 'value must be a non-empty string' };
  const v = value.trim();
  switch (type) {
    case 'cron': {
      if (v.split(/\s+/).length !== CRON_FIELDS)
        return {
          ok: false,
          reason: `a cron value has ${CRON_FIELDS} fields (minute hour day month weekday), got "${v}"`,
        };
      try {
        new Cron(v, { paused: true, timezone: 'UTC' });
      } catch (e) {
        return { ok: false, reason: `not a cron expression: ${(e as Error).message}` };
      }
      return { ok: true, timing: { type: 'cron', value: v } };
    }
    case 'at':
      if (!isIsoDate(v))
        return { ok: false, reason: 'an at value is an RFC 3339 date-time like 2030-07-01T09:00:00Z' };
      return { ok: true, timing: { type: 'at', value: new Date(Date.parse(v)).toISOString() } };
    case 'sleep': {
      const ms = durationMs(v);
      if (ms === undefined) return { ok: false, reason: 'a sleep value is a duration like 30s, 15m, 2h, 7d' };
      return { ok: true, timing: { type: 'at', value: new Date(nowMs + ms).toISOString() } };
    }
    default:
      return { ok: false, reason: 'type must be cron, at or sleep' };
  }
}

/**
 * The first firing strictly after `afterMs`, in epoch ms; undefined when there is none (an `at` already past).
 * A firing missed while the server was down is not replayed one by one: the runner fires what is due once, then
 * asks for the next one after *now*.
 */
export function nextFiring(t: StoredTiming, afterMs: number): number | undefined {
  if (t.type === 'at') {
    const at = Date.parse(t.value);
    return at > afterMs ? at : undefined;
  }
  const next = new Cron(t.value, { paused: true, timezone: 'UTC' }).nextRun(new Date(afterMs));
  return next ? next.getTime() : undefined;
}
