// `berth get quotas`: the quotas of the workspace the CLI acts in (GET /v0/quotas), each limit beside what it uses
// now, as a table, JSON or YAML. Beyond a quota a create is refused (429 QUOTA_EXCEEDED) and a replica, build or job
// task waits; the SETTING column names what the server's operator changes to raise it.
import { Api } from './client.js';
import { loadCliConfig } from './config.js';
import { type Format, renderData, table } from './output.js';

interface Line {
  limit: number | null;
  used: number;
  unit?: string;
  setting: string;
}

const amount = (n: number | null, unit?: string) => (n === null ? 'none' : unit ? `${n} ${unit}` : String(n));

export async function getQuotas(format: Format = 'table') {
  const { body } = await new Api(loadCliConfig()).call('GET', '/quotas');
  if (format === 'json' || format === 'yaml') return void process.stdout.write(renderData(body, format));
  const rows = [['QUOTA', 'LIMIT', 'USED', 'SETTING']];
  for (const [name, q] of Object.entries<Line>(body?.quotas ?? {}))
    rows.push([name, amount(q.limit, q.unit), amount(q.used, q.unit), q.setting]);
  process.stdout.write(`workspace ${body?.workspace}\n${table(rows)}\n`);
}
