// `berth image list|pull|import|build|rm`: the server's image store as the workspace sees it (/v0/images). Pull and
// import answer once the image is unpacked and ready for sandboxes; rm lets go of the workspace's name.
import { openAsBlob } from 'node:fs';
import type { Command } from 'commander';
import { Api } from './client.js';
import { registerImageBuild } from './image-build.js';
import { loadCliConfig } from './config.js';
import { age } from './format.js';
import { OUTPUT_HELP, parseFormat, renderData, renderTable } from './output.js';
import { Progress } from './progress.js';

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

function print(images: any[], output?: string) {
  const format = parseFormat(output);
  if (format === 'json' || format === 'yaml') return void process.stdout.write(renderData(images, format));
  const columns = [
    { head: 'NAME', cell: (i: any) => (i.references ?? []).join(', ') || '-' },
    { head: 'ID', cell: (i: any) => String(i.id).slice(7, 19) },
    { head: 'SIZE', cell: (i: any) => mb(i.size ?? 0) },
    { head: 'LAYERS', cell: (i: any) => String(i.layers?.length ?? 0) },
    { head: 'IN USE', cell: (i: any) => (i.inUse ? 'yes' : 'no') },
    ...(format === 'wide'
      ? [
          { head: 'UNPACKED', cell: (i: any) => mb(i.unpackedSize ?? 0) },
          { head: 'AGE', cell: (i: any) => age(i.createdAt) },
        ]
      : []),
  ];
  if (!images.length) return void process.stderr.write('no images yet\n');
  process.stdout.write(`${renderTable(images, columns)}\n`);
}

export function registerImage(program: Command) {
  const image = program
    .command('image')
    .description('images sandboxes run on: list, pull, import, build, rm');
  image
    .command('list')
    .alias('ls')
    .description("the workspace's images (pulled or imported by name, or run by its sandboxes)")
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (o: { output?: string }) => {
      print((await new Api(loadCliConfig()).call('GET', '/images')).body ?? [], o.output);
    });
  image
    .command('pull <reference>')
    .description('pull an image from its registry into the server (e.g. python:3.12-slim)')
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (reference: string, o: { output?: string }) => {
      const progress = new Progress();
      progress.phase(`pulling ${reference}`);
      let failed = true;
      try {
        const { body } = await new Api(loadCliConfig()).call('POST', '/images', { body: { reference } });
        failed = false;
        progress.stop();
        process.stderr.write(
          `pulled ${reference}: ${body.layers?.length ?? 0} layers, ${mb(body.size ?? 0)} (${progress.total()})\n`,
        );
        print([body], o.output);
      } finally {
        progress.stop(failed);
      }
    });
  image
    .command('import <file>')
    .description(
      'import a `docker save` tarball or an OCI layout archive (for machines without registry access)',
    )
    .option('--name <reference>', 'the name to import it as (needed when the archive names no image)')
    .option('-o, --output <format>', OUTPUT_HELP)
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
