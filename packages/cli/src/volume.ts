// `berth volume create|list|get|delete` and `berth volume-template push <name> <dir>`: storage that outlives
// sandboxes (docs/volumes.md). A push streams `tar -cz` of the directory to the server, never the whole archive
// in memory.
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { apiBase, kindByName } from '@berth/sdk';
import type { Command } from 'commander';
import { Api, ApiFailure, itemPath, listAll, warningLines } from './client.js';
import { type CliConfig, loadCliConfig } from './config.js';
import { OUTPUT_HELP, parseFormat, render } from './output.js';
import { Progress } from './progress.js';
import { outcomeLine, waitFor } from './wait.js';

const VOLUME = kindByName('volume')!;
/** Longest `create` waits for a volume to be ready (seeding it from a large template version takes a while). */
const WAIT_MS = 10 * 60_000;

const show = (objects: any[], output: string | undefined, single: boolean) =>
  process.stdout.write(render(objects, parseFormat(output), VOLUME, single));

export function registerVolume(program: Command) {
  const volume = program
    .command('volume')
    .alias('vol')
    .description('volumes: storage that outlives sandboxes');

  volume
    .command('create')
    .description(
      'create a volume (its size is a hard cap) and wait until it is ready (exit 1 with the reason if not)',
    )
    .argument('<name>', 'volume name (lowercase letters, digits, -)')
    .option('--size <mb>', 'size in MB (default 1024)')
    .option('--template <template>', 'seed it from a volume template: name or name:version')
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (name: string, o: { size?: string; template?: string; output?: string }) => {
      const spec: Record<string, unknown> = {};
      if (o.size !== undefined) {
        const mb = Number(o.size);
        if (!Number.isInteger(mb) || mb <= 0)
          throw new Error(`--size takes a whole number of MB, got ${o.size}`);
        spec.size = mb;
      }
      if (o.template) spec.template = o.template;
      const cfg = loadCliConfig();
      const { body } = await new Api(cfg).call('POST', '/volumes', {
        body: { metadata: { name }, spec },
        query: { fieldValidation: 'Strict' },
      });
      process.stderr.write(warningLines(`volume/${name}`, body));
      const progress = new Progress();
      const outcome = await waitFor(cfg, VOLUME, '/volumes', name, progress, WAIT_MS).finally(() =>
        progress.stop(),
      );
      if (outcome.status !== 'DEPLOYED') {
        const { line } = outcomeLine(VOLUME, outcome);
        process.stderr.write(`${line}\n`);
        process.exitCode = 1;
        return;
      }
      show([outcome.object], o.output, true);
    });

  volume
    .command('list')
    .alias('ls')
    .description('list volumes')
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (o: { output?: string }) => {
      const items = await listAll(new Api(loadCliConfig()), '/volumes');
      if (!items.length && ['table', 'wide'].includes(parseFormat(o.output)))
        process.stderr.write('no volumes found\n');
      else show(items, o.output, false);
    });

  volume
    .command('get')
    .description('show one volume')
    .argument('<name>', 'volume name')
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (name: string, o: { output?: string }) => {
      const { body } = await new Api(loadCliConfig()).call('GET', itemPath('/volumes', name));
      show([body], o.output, true);
    });

  volume
    .command('delete')
    .alias('rm')
    .description('delete a volume and its data (refused while a sandbox holds it)')
    .argument('<name>', 'volume name')
    .action(async (name: string) => {
      const { body } = await new Api(loadCliConfig()).call('DELETE', itemPath('/volumes', name));
      process.stdout.write(`volume/${name} deleted (${body?.status ?? 'DELETING'})\n`);
    });

  const template = program
    .command('volume-template')
    .description('volume templates: prepared volume contents');
  template
    .command('push')
    .description('upload a directory as a new version of a volume template (created if absent)')
    .argument('<name>', 'template name')
    .argument('<dir>', 'directory whose contents become the volume contents')
    .option('--version-name <version>', 'version name (default: a timestamp such as v20260301120000)')
    .action(async (name: string, dir: string, o: { versionName?: string }) => {
      if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory())
        throw new Error(`${dir} is not a directory`);
      const cfg = loadCliConfig();
      const api = new Api(cfg);
      try {
        await api.call('POST', '/volume_templates', { body: { metadata: { name }, spec: {} } });
      } catch (e) {
        if (!(e instanceof ApiFailure && e.status === 409)) throw e;
      }
      const version = o.versionName ?? `v${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}`;
      const v = await pushArchive(cfg, name, version, dir);
      process.stdout.write(`volume-template/${name} version ${v.name} uploaded (${v.contentSize} bytes)\n`);
    });
}

/** Streams `tar -cz -C dir .` as the body of the version's PUT. */
async function pushArchive(cfg: CliConfig, name: string, version: string, dir: string): Promise<any> {
  const tar = spawn('tar', ['-cz', '-C', dir, '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  tar.stderr.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise<number>((r) => tar.on('close', (code) => r(code ?? 1)));
  const headers: Record<string, string> = {
    authorization: `Bearer ${cfg.apiKey}`,
    'content-type': 'application/gzip',
    accept: 'application/json',
  };
  if (cfg.workspace) headers['x-service-workspace'] = cfg.workspace;
  const url = `${apiBase(cfg.url)}/volume_templates/${encodeURIComponent(name)}/versions/${encodeURIComponent(version)}`;
  const res = await fetch(url, {
    method: 'PUT',
    headers,
    body: Readable.toWeb(tar.stdout) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  const text = await res.text();
  if ((await exited) !== 0) throw new Error(`tar failed: ${stderr.trim()}`);
  const body = text ? JSON.parse(text) : undefined;
  if (!res.ok) throw new ApiFailure(res.status, body);
  return body;
}
