// `berth get <kind> [name]`: one object or every page of a list, as a table, JSON or YAML.
import type { Command } from 'commander';
import { Api, addParentFlags, collectionPath, itemPath, listAll, resolveKind } from './client.js';
import { loadCliConfig } from './config.js';
import { connectionRows } from './connections.js';
import { getExecutions } from './jobs.js';
import { type Format, parseFormat, render } from './output.js';
import { getQuotas } from './quotas.js';
import { listRevisions } from './workloads.js';

interface GetOptions {
  output?: string;
  selector?: string;
  showSecrets?: boolean;
  [parent: string]: unknown;
}

/** A kind with columns of its own as a table (connections: their token state), else the common rendering. */
const show = (objects: any[], format: Format, kind: string, single: boolean) =>
  format === 'table' && kind === 'IntegrationConnection'
    ? connectionRows(objects)
    : render(objects, format, kind, single);

export function registerGet(program: Command) {
  const cmd = program
    .command('get')
    .description(
      'show one object or list a kind (e.g. `berth get policies`, `berth get policy p1 -o yaml`); `berth get quotas` shows the workspace quotas',
    )
    .argument('<kind>', 'kind: plural, singular or alias')
    .argument('[name]', 'object name; omit to list')
    .argument(
      '[job]',
      'with `executions job` / `revisions agent`: the object whose executions or revisions to list',
    )
    .option('-o, --output <format>', 'json or yaml (default: a table)')
    .option('-l, --selector <labels>', 'label filter: key=value,...')
    .option('--show-secrets', 'reveal secret values (workspace admin)');
  addParentFlags(cmd).action(
    async (kindName: string, name: string | undefined, job: unknown, o: GetOptions) => {
      if (/^executions?$/.test(kindName)) {
        if (name !== 'job' || typeof job !== 'string')
          throw new Error('usage: berth get executions job <name>');
        return getExecutions(job);
      }
      if (/^quotas?$/.test(kindName)) return getQuotas(o.output);
      if (/^revisions?$/.test(kindName)) {
        if (!name || typeof job !== 'string')
          throw new Error('usage: berth get revisions agent|function <name>');
        return listRevisions(name, job);
      }
      const kd = resolveKind(kindName);
      const format = parseFormat(o.output);
      const api = new Api(loadCliConfig());
      const coll = collectionPath(kd, o);
      const query: Record<string, string> = o.showSecrets ? { show_secrets: 'true' } : {};
      if (name) {
        const { body } = await api.call('GET', itemPath(coll, name), { query });
        process.stdout.write(show([body], format, kd.kind, true));
        return;
      }
      if (o.selector) query.labels = o.selector;
      const items = await listAll(api, coll, query);
      if (!items.length && format === 'table') process.stderr.write(`no ${kd.plural} found\n`);
      else process.stdout.write(show(items, format, kd.kind, false));
    },
  );
}
