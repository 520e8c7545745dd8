// `berth get connections`: what each integration connection is, and for an OAuth2 one what its tokens are doing
// (decision 049) — never a token: the server answers only the state, times and the provider's last error.
import { table } from './output.js';

/** Longest provider error shown in the table (the whole one is in `-o yaml`). */
const ERROR_WIDTH = 80;

/** `in 42s`, `3m ago`: a time relative to now, in the units `age` uses. */
export function relative(at: unknown, now = Date.now()): string {
  const t = typeof at === 'string' ? Date.parse(at) : Number.NaN;
  if (Number.isNaN(t)) return '-';
  const s = Math.round(Math.abs(t - now) / 1000);
  const span =
    s < 120
      ? `${s}s`
      : s < 7200
        ? `${Math.floor(s / 60)}m`
        : s < 172800
          ? `${Math.floor(s / 3600)}h`
          : `${Math.floor(s / 86400)}d`;
  return t >= now ? `in ${span}` : `${span} ago`;
}

export function connectionRows(objects: any[], now = Date.now()): string {
  const out = [['NAME', 'INTEGRATION', 'TOKEN', 'VALID UNTIL', 'LAST REFRESH', 'LAST ERROR']];
  for (const o of objects) {
    const t = o?.token;
    const error = String(t?.lastError ?? '-').replace(/\s+/g, ' ');
    out.push([
      String(o?.metadata?.name ?? '-'),
      String(o?.spec?.integration ?? '-'),
      String(t?.state ?? '-'),
      t?.state === 'VALID' ? relative(t.validUntil, now) : '-',
      relative(t?.lastRefreshAt, now),
      error.length > ERROR_WIDTH ? `${error.slice(0, ERROR_WIDTH - 1)}…` : error,
    ]);
  }
  return `${table(out)}\n`;
}
