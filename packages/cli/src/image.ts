// `berth image list|pull|import|build|rm`: the server's image store as the workspace sees it (/v0/images). Pull and
// import answer once the image is unpacked and ready for sandboxes; rm lets go of the workspace's name.
import { openAsBlob } from 'node:fs';
import type { Command } from 'commander';
import { Api } from './client.js';
import { registerImageBuild } from './image-build.js';
import { loadCliConfig } from './config.js';
import { table } from './output.js';

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

function print(images: any[], format?: string) {
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(images, null, 2)}\n`);
    return;
  }
  const rows = [['NAME', 'ID', 'SIZE', 'LAYERS', 'IN USE']];
  for (const i of images)
    rows.push([
      (i.references ?? []).join(', ') || '-',
      String(i.id).slice(7, 19),
      mb(i.size ?? 0),
      String(i.layers?.length ?? 0),
      i.inUse ? 'yes' : 'no',
    ]);
  process.stdout.write(`${table(rows)}\n`);
}

export function registerImage(program: Command) {
  const image = program
    .command('image')
    .description('images sandboxes run on: list, pull, import, build, rm');
  image
    .command('list')
    .alias('ls')
    .description("the workspace's images (pulled or imported by name, or run by its sandboxes)")
    .option('-o, --output <format>', 'json (default: a table)')
    .action(async (o: { output?: string }) => {
      print((await new Api(loadCliConfig()).call('GET', '/images')).body ?? [], o.output);
    });
  image
    .command('pull <reference>')
    .description('pull an image from its registry into the server (e.g. python:3.12-slim)')
    .option('-o, --output <format>', 'json (default: a table)')
    .action(async (reference: string, o: { output?: string }) => {
      process.stderr.write(`pulling ${reference}...\n`);
      print(
        [(await new Api(loadCliConfig()).call('POST', '/images', { body: { reference } })).body],
        o.output,
      );
    });
  image
    .command('import <file>')
    .description(
      'import a `docker save` tarball or an OCI layout archive (for machines without registry access)',
    )
    .option('--name <reference>', 'the name to import it as (needed when the archive names no image)')
    .option('-o, --output <format>', 'json (default: a table)')
    .action(async (file: string, o: { name?: string; output?: string }) => {
      const body = await openAsBlob(file);
      const r = await new Api(loadCliConfig()).call('POST', '/images/import', {
        raw: { body, type: 'application/x-tar' },
        query: o.name ? { name: o.name } : {},
      });
      print(r.body ?? [], o.output);
    });
  registerImageBuild(image);
  image
    .command('rm <name>')
    .description("forget the workspace's name for an image (refused while a sandbox runs on it)")
    .action(async (name: string) => {
      await new Api(loadCliConfig()).call('DELETE', `/images/${name}`);
      process.stdout.write(`removed ${name}\n`);
    });
}
