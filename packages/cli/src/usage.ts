// `berth usage [--model m] [--since 24h] [--by key|hour]`: tokens, calls and errors through the model
// gateway, per model and API key (or hour), as a table or JSON.
import type { Command } from 'commander';
import { Api, listAll } from './client.js';
import { loadCliConfig } from './config.js';
import { OUTPUT_HELP, parseFormat, renderData, table } from './output.js';

interface UsageOptions {
  model?: string;
  since: string;
  by: string;
  output?: string;
}

async function modelNames(api: Api): Promise<string[]> {
  return (await listAll(api, '/models'))
    .map((m) => m?.metadata?.name)
    .filter((n): n is string => typeof n === 'string');
}

export function registerUsage(program: Command) {
  program
    .command('usage')
    .description('model gateway usage: tokens in and out, calls, errors, latency')
    .option('--model <name>', 'one model endpoint (default: all)')
    .option('--since <when>', 'a duration back from now (24h, 7d) or an ISO time', '24h')
    .option('--by <group>', 'group rows by key or hour', 'key')
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (o: UsageOptions) => {
      if (o.by !== 'key' && o.by !== 'hour') throw new Error('--by must be key or hour');
      const format = parseFormat(o.output);
      const api = new Api(loadCliConfig());
      const models = o.model ? [o.model] : await modelNames(api);
      const rows: Record<string, any>[] = [];
      for (const m of models) {
        const path = `/models/${encodeURIComponent(m)}/usage`;
        const { body } = await api.call('GET', path, { query: { from: o.since, groupBy: o.by } });
        for (const r of Array.isArray(body) ? body : []) rows.push({ model: m, ...r });
      }
      if (format === 'json' || format === 'yaml') return void process.stdout.write(renderData(rows, format));
      if (!rows.length) {
        process.stderr.write(`no model usage since ${o.since}\n`);
        return;
      }
      const head = ['MODEL', o.by === 'key' ? 'KEY' : 'HOUR', 'CALLS', 'ERRORS', 'INPUT', 'OUTPUT', 'AVG MS'];
      const lines = rows.map((r) => [
        r.model,
        String(o.by === 'key' ? r.keyId : r.hour),
        String(r.requests),
        String(r.errors),
        String(r.inputTokens),
        String(r.outputTokens),
        String(r.avgLatencyMs),
      ]);
      process.stdout.write(`${table([head, ...lines])}\n`);
    });
}
