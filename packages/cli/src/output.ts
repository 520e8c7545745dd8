// How objects are printed: a table with the columns that matter for their kind (columns.ts), `-o wide` with more of
// them, `-o json` (the API's answer as it is), or `-o yaml` documents that `berth apply -f` takes back (each with its
// `kind:`). The YAML library is loaded only when YAML is asked for.
import { createRequire } from 'node:module';
import { type Column, columnsOf } from './columns.js';
import { row, widthsOf } from './format.js';
import { paintStatus } from './style.js';

export { age, table } from './format.js';

export type Format = 'table' | 'wide' | 'json' | 'yaml';

export const OUTPUT_HELP = 'json, yaml or wide (default: a table)';

export function parseFormat(s: string | undefined): Format {
  if (s === undefined || s === 'table') return 'table';
  if (s === 'json' || s === 'yaml' || s === 'wide') return s;
  throw new Error(`unknown output format ${JSON.stringify(s)}: use json, yaml or wide`);
}

/** The YAML library, loaded on first use (it costs a tenth of a second at start). */
export const yaml = (): typeof import('yaml') => createRequire(import.meta.url)('yaml');

/** Any value as JSON or YAML: what `-o json|yaml` prints for answers that are not objects of a kind. */
export function renderData(value: unknown, format: 'json' | 'yaml') {
  return format === 'json' ? `${JSON.stringify(value, null, 2)}\n` : yaml().stringify(value);
}

/** A table of `objects` under `columns`, the STATUS column coloured on a terminal that takes colours. */
export function renderTable(objects: any[], columns: Column[], out: NodeJS.WriteStream = process.stdout) {
  const rows = [columns.map((c) => c.head), ...objects.map((o) => columns.map((c) => oneLine(c.cell(o))))];
  const widths = widthsOf(rows);
  const statusAt = columns.findIndex((c) => c.head === 'STATUS');
  return rows
    .map((r, n) =>
      row(r, widths, (cell, i) =>
        n > 0 && i === statusAt ? cell.replace(/\S+/, (s) => paintStatus(out, s)) : cell,
      ),
    )
    .join('\n');
}

/** A reason can hold a newline (a build's last lines): in a table cell it is cut to its first line. */
const oneLine = (s: string) => {
  const first = s.split('\n')[0];
  return first.length < s.length ? `${first} …` : first;
};

export interface KindLike {
  kind: string;
  hasStatus: boolean;
}

export function render(objects: any[], format: Format, kd: KindLike, single: boolean): string {
  if (format === 'json') return `${JSON.stringify(single ? objects[0] : objects, null, 2)}\n`;
  if (format === 'yaml') return objects.map((o) => yaml().stringify({ kind: kd.kind, ...o })).join('---\n');
  if (!objects.length) return '';
  return `${renderTable(objects, columnsOf(kd.kind, kd.hasStatus, format === 'wide'))}\n`;
}
