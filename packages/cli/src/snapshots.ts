// `berth sandbox snapshot|restore|fork` and `berth get snapshots` (decision 053): capture a sandbox's files, bring it
// back to a snapshot under the same name, start a new sandbox from it, and list the workspace's snapshots. A
// snapshot holds files only (no memory, no processes): a restore or a fork starts processes fresh.
import type { Command } from 'commander';
import { Api, itemPath, listAll } from './client.js';
import { loadCliConfig } from './config.js';
import { parseEnvs } from './flags.js';
import { age, type Format, renderData, table } from './output.js';

const mb = (bytes: number | undefined) => `${((bytes ?? 0) / 1024 ** 2).toFixed(1)} MB`;

export async function getSnapshots(id: string | undefined, format: Format = 'table') {
  const api = new Api(loadCliConfig());
  const items = id
    ? [(await api.call('GET', itemPath('/snapshots', id))).body]
    : await listAll(api, '/snapshots');
  if (format === 'json' || format === 'yaml')
    return void process.stdout.write(renderData(id ? items[0] : items, format));
  if (!items.length) return void process.stderr.write('no snapshots found\n');
  const rows = [['NAME', 'ID', 'SOURCE', 'STATUS', 'SIZE', 'LAYERS', 'AGE']];
  for (const s of items)
    rows.push([
      s.name,
      s.id,
      `sandbox/${s.source?.name}${s.source?.deleted ? ' (deleted)' : ''}`,
      s.status,
      mb(s.spec?.sizeBytes),
      String(s.spec?.layers ?? ''),
      age(s.createdAt),
    ]);
  process.stdout.write(`${table(rows)}\n`);
}

export function registerSandboxSnapshots(sandbox: Command) {
  sandbox
    .command('snapshot')
    .description(
      "capture the sandbox's files as a snapshot (frozen for the copy only; no memory, no processes)",
    )
    .argument('<name>', 'sandbox name')
    .argument('[snapshot]', 'snapshot name, unique among the sandbox’s (default: generated)')
    .action(async (name: string, snapshot: string | undefined) => {
      const { body } = await new Api(loadCliConfig()).call(
        'POST',
        `${itemPath('/sandboxes', name)}/snapshots`,
        {
          body: snapshot ? { name: snapshot } : {},
        },
      );
      process.stdout.write(
        `snapshot/${body.name} ${body.id} of sandbox/${name}: ${mb(body.spec?.sizeBytes)} new, paused ${body.spec?.pausedMs} ms\n`,
      );
    });

  sandbox
    .command('restore')
    .description('bring the sandbox back to one of its snapshots (same name and URLs; processes start fresh)')
    .argument('<name>', 'sandbox name')
    .argument('<snapshot>', 'snapshot id or name')
    .action(async (name: string, snapshot: string) => {
      const path = `${itemPath('/sandboxes', name)}/snapshots/${encodeURIComponent(snapshot)}/restore`;
      const { body } = await new Api(loadCliConfig()).call('POST', path);
      process.stdout.write(`sandbox/${name} restoring from ${body.snapshotId}\n`);
    });

  sandbox
    .command('fork')
    .description('start a new sandbox with the files of this one (captured now, or --snapshot)')
    .argument('<name>', 'sandbox name')
    .argument('<target>', 'name of the new sandbox')
    .option('--snapshot <id>', 'fork this snapshot instead of capturing the sandbox now')
    .option('-e, --env <KEY=VALUE...>', 'environment variables over the source’s')
    .action(async (name: string, target: string, o: { snapshot?: string; env?: string[] }) => {
      const envs = parseEnvs(o.env);
      const { body } = await new Api(loadCliConfig()).call('POST', `${itemPath('/sandboxes', name)}/fork`, {
        body: {
          targetName: target,
          targetType: 'sandbox',
          ...(o.snapshot ? { snapshotId: o.snapshot } : {}),
          ...(envs.length ? { envs } : {}),
        },
      });
      process.stdout.write(`sandbox/${body.name} forked from ${body.snapshotId}\n`);
    });
}
