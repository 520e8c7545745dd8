// `berth status`: is the server reachable, which version it runs, and what the workspace holds: sandboxes by
// status and by run state, and how many models and agents — the first thing to run when something looks off.
import type { Command } from 'commander';
import { Api, listAll } from './client.js';
import { loadCliConfig } from './config.js';
import { OUTPUT_HELP, parseFormat, renderData, table } from './output.js';
import { serverHealth } from './server-info.js';

export interface StatusReport {
  server: { url: string; status: string; version: string };
  workspace: string;
  sandboxes: { total: number; byStatus: Record<string, number>; byState: Record<string, number> };
  models: number;
  agents: number;
}

const countBy = (items: any[], field: string) => {
  const out: Record<string, number> = {};
  for (const o of items) {
    const v = typeof o?.[field] === 'string' ? o[field] : '-';
    out[v] = (out[v] ?? 0) + 1;
  }
  return out;
};

/** `DEPLOYED 2, FAILED 1`, in name order; `-` for none. */
const counts = (m: Record<string, number>) =>
  Object.entries(m)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ') || '-';

export function registerStatus(program: Command) {
  program
    .command('status')
    .description('server reachability and version; sandboxes by status and state; model and agent counts')
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (o: { output?: string }) => {
      const format = parseFormat(o.output);
      const cfg = loadCliConfig();
      const health = await serverHealth(cfg);
      const api = new Api(cfg);
      const [sandboxes, models, agents] = await Promise.all(
        ['/sandboxes', '/models', '/agents'].map((p) => listAll(api, p)),
      );
      const report: StatusReport = {
        server: health,
        workspace: sandboxes[0]?.metadata?.workspace ?? cfg.workspace ?? '(the API key’s home workspace)',
        sandboxes: {
          total: sandboxes.length,
          byStatus: countBy(sandboxes, 'status'),
          byState: countBy(sandboxes, 'state'),
        },
        models: models.length,
        agents: agents.length,
      };
      if (format === 'json' || format === 'yaml')
        return void process.stdout.write(renderData(report, format));
      const s = report.sandboxes;
      const rows = [
        ['server', `${health.url} (${health.status}, version ${health.version})`],
        ['workspace', report.workspace],
        [
          'sandboxes',
          s.total ? `${s.total} (status: ${counts(s.byStatus)}; state: ${counts(s.byState)})` : '0',
        ],
        ['models', String(report.models)],
        ['agents', String(report.agents)],
      ];
      process.stdout.write(`${table(rows)}\n`);
    });
}
