// Plain text shapes shared by every printer: an age as kubectl shows it, and aligned columns.

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

/** Column widths of `rows` (the header row included). */
export const widthsOf = (rows: string[][]) =>
  rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));

/** One row padded to `widths`; `paint` colours a cell after it is padded (escape codes take no column). */
export function row(cells: string[], widths: number[], paint?: (cell: string, i: number) => string) {
  return cells
    .map((c, i) => {
      const padded = i === cells.length - 1 ? c : c.padEnd(widths[i] + 3);
      return paint ? paint(padded, i) : padded;
    })
    .join('')
    .trimEnd();
}

export function table(rows: string[][]) {
  const widths = widthsOf(rows);
  return rows.map((r) => row(r, widths)).join('\n');
}
