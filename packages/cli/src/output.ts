// How objects are printed: a NAME/STATUS/AGE table by default, or JSON, or YAML documents that
// `berth apply -f` takes back (each with its `kind:`).
import YAML from 'yaml';

export type Format = 'table' | 'json' | 'yaml';

export function parseFormat(s: string | undefined): Format {
  if (s === undefined || s === 'table' || s === 'wide') return 'table';
  if (s === 'json' || s === 'yaml') return s;
  throw new Error(`unknown output format ${JSON.stringify(s)}: use json or yaml`);
}

/** `42s`, `5m`, `3h`, `2d`: the age of an object as kubectl shows it. */
export function age(createdAt: unknown, now = Date.now()) {
  const t = typeof createdAt === 'string' ? Date.parse(createdAt) : Number.NaN;
  if (Number.isNaN(t)) return '-';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function table(rows: string[][]) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] + 3)))
        .join('')
        .trimEnd(),
    )
    .join('\n');
}

export function render(objects: any[], format: Format, kind: string, single: boolean): string {
  if (format === 'json') return `${JSON.stringify(single ? objects[0] : objects, null, 2)}\n`;
  if (format === 'yaml') return objects.map((o) => YAML.stringify({ kind, ...o })).join('---\n');
  if (!objects.length) return '';
  const rows = [['NAME', 'STATUS', 'AGE']];
  for (const o of objects)
    rows.push([
      String(o?.metadata?.name ?? '-'),
      typeof o?.status === 'string' ? o.status : '-',
      age(o?.metadata?.createdAt),
    ]);
  return `${table(rows)}\n`;
}
