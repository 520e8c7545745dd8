// `berth get <kind> [name]`: one object or every page of a list, as a table with the kind's columns, `-o wide`, JSON
// or YAML; `--watch` then prints each change as it happens, from the server's watch of the list or object.
import type { KindInfo } from '@berth/sdk';
import type { Command } from 'commander';
import {
  Api,
  addParentFlags,
  collectionPath,
  itemPath,
  listAll,
  resolveKind,
  type WatchEvent,
  watch,
} from './client.js';
import { columnsOf } from './columns.js';
import { type CliConfig, loadCliConfig } from './config.js';
import { row, widthsOf } from './format.js';
import { type Format, OUTPUT_HELP, parseFormat, render, renderTable, yaml } from './output.js';
import { paintStatus } from './style.js';

interface GetOptions {
  output?: string;
  selector?: string;
  showSecrets?: boolean;
  watch?: boolean;
  [parent: string]: unknown;
}

export function registerGet(program: Command) {
  const cmd = program
    .command('get')
    .description(
      "show one object or list a kind (e.g. `berth get policies`, `berth get policy p1 -o yaml`); `berth get quotas` shows the workspace quotas, `berth get nodes` the cluster's servers",
    )
    .argument('<kind>', 'kind: plural, singular or alias')
    .argument('[name]', 'object name; omit to list')
    .argument(
      '[job]',
      'with `executions job` / `revisions agent`: the object whose executions or revisions to list',
    )
    .option('-o, --output <format>', OUTPUT_HELP)
    .option('-l, --selector <labels>', 'label filter: key=value,...')
    .option('-w, --watch', 'then print each change as it happens (until interrupted)')
    .option('--show-secrets', 'reveal secret values (workspace admin)');
  addParentFlags(cmd).action(
    async (kindName: string, name: string | undefined, job: unknown, o: GetOptions) => {
      const format = parseFormat(o.output);
      if (/^executions?$/.test(kindName)) {
        if (name !== 'job' || typeof job !== 'string')
          throw new Error('usage: berth get executions job <name>');
        // Loaded only here: a plain `get` starts without the job, revision and quota modules.
        return (await import('./jobs.js')).getExecutions(job, format);
      }
      if (/^quotas?$/.test(kindName)) return (await import('./quotas.js')).getQuotas(format);
      if (/^nodes?$/.test(kindName)) return (await import('./nodes.js')).getNodes(format);
      if (/^snapshots?$/.test(kindName)) return (await import('./snapshots.js')).getSnapshots(name, format);
      if (/^revisions?$/.test(kindName)) {
        if (!name || typeof job !== 'string')
          throw new Error('usage: berth get revisions agent|function <name>');
        return (await import('./workloads.js')).listRevisions(name, job, format);
      }
      const kd = resolveKind(kindName);
      const cfg = loadCliConfig();
      const coll = collectionPath(kd, o);
      const query: Record<string, string> = o.showSecrets ? { show_secrets: 'true' } : {};
      if (o.selector && !name) query.labels = o.selector;
      if (o.watch) return watchGet(cfg, kd, name ? itemPath(coll, name) : coll, query, format, !name);
      const api = new Api(cfg);
      if (name) {
        const { body } = await api.call('GET', itemPath(coll, name), { query });
        process.stdout.write(render([body], format, kd, true));
        return;
      }
      const items = await listAll(api, coll, query);
      if (!items.length && (format === 'table' || format === 'wide'))
        process.stderr.write(`no ${kd.plural} found\n`);
      else process.stdout.write(render(items, format, kd, false));
    },
  );
}

/**
 * The list (or object) as it is, then one line per change: a table row (status `DELETED` for a removed object) with
 * the first table's widths, or with `-o json` one JSON event per line, with `-o yaml` one document per event.
 */
async function watchGet(
  cfg: CliConfig,
  kd: KindInfo,
  path: string,
  query: Record<string, string>,
  format: Format,
  isList: boolean,
) {
  const columns = columnsOf(kd.kind, kd.hasStatus, format === 'wide');
  const statusAt = columns.findIndex((c) => c.head === 'STATUS');
  const initial: any[] = [];
  let widths: number[] | undefined;
  const out = process.stdout;
  for await (const e of watch(cfg, path, query) as AsyncIterable<WatchEvent>) {
    if (format === 'json' || format === 'yaml') {
      if (e.type === 'SYNCED') continue;
      out.write(format === 'json' ? `${JSON.stringify(e)}\n` : `---\n${yaml().stringify(e)}`);
      continue;
    }
    if (e.type === 'SYNCED') {
      if (!initial.length && isList) process.stderr.write(`no ${kd.plural} yet; waiting for changes\n`);
      out.write(`${renderTable(initial, columns)}\n`);
      widths = widthsOf([columns.map((c) => c.head), ...initial.map((x) => columns.map((c) => c.cell(x)))]);
      continue;
    }
    if (!widths) {
      initial.push(e.object);
      continue;
    }
    const cells = columns.map((c) => c.cell(e.object));
    if (e.type === 'DELETED') {
      if (statusAt >= 0) cells[statusAt] = 'DELETED';
      else cells[0] += ' (deleted)';
    }
    out.write(
      `${row(cells, widths, (cell, i) => (i === statusAt ? cell.replace(/\S+/, (s) => paintStatus(out, s)) : cell))}\n`,
    );
  }
}
