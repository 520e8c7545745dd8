// `berth image build <dir> -t name:tag`: the directory sent as the build context (a tar.gz, without what its
// .dockerignore excludes, as the docker CLI sends it; the server applies the file again), POST /v0/images/build, and
// the build's log printed as it streams. Exits 1 with the server's message (naming the failing instruction) when the
// build fails.
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import dockerignore from '@balena/dockerignore';
import { apiBase } from '@berth/sdk';
import type { Command } from 'commander';
import { create } from 'tar';
import { ApiFailure } from './client.js';
import { loadCliConfig } from './config.js';

interface BuildOptions {
  tag: string;
  file?: string;
  buildArg: string[];
  target?: string;
  cache: boolean;
  network?: string;
  allowDomain: string[];
  quiet?: boolean;
}

const collect = (v: string, prev: string[]) => [...prev, v];

/** The context as a gzip tar stream: every file of `dir` but those .dockerignore excludes (and never that file). */
function contextStream(dir: string, dockerfile: string): Readable {
  const ignoreFile = join(dir, '.dockerignore');
  const patterns = existsSync(ignoreFile)
    ? readFileSync(ignoreFile, 'utf8')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'))
    : [];
  const ig = dockerignore.default().add(patterns);
  const always = new Set([dockerfile, '.dockerignore']);
  const packed = create(
    {
      cwd: dir,
      gzip: true,
      portable: true,
      filter: (p) => {
        const rel = relative('.', p);
        return !rel || always.has(rel) || !ig.ignores(rel);
      },
    },
    ['.'],
  );
  // node-tar's stream is a Minipass, not a stream.Readable: read it as the async iterable it is.
  return Readable.from(packed as unknown as AsyncIterable<Buffer>);
}

export async function buildCommand(dir: string, o: BuildOptions): Promise<void> {
  const cfg = loadCliConfig();
  const dockerfile = o.file ?? 'Dockerfile';
  if (!existsSync(join(dir, dockerfile))) throw new Error(`${join(dir, dockerfile)} does not exist`);
  const url = new URL(`${apiBase(cfg.url)}/images/build`);
  url.searchParams.set('t', o.tag);
  if (o.file) url.searchParams.set('dockerfile', o.file);
  if (o.target) url.searchParams.set('target', o.target);
  if (!o.cache) url.searchParams.set('noCache', 'true');
  if (o.network) url.searchParams.set('network', o.network);
  for (const a of o.buildArg)
    url.searchParams.append('buildArg', a.includes('=') ? a : `${a}=${process.env[a] ?? ''}`);
  for (const d of o.allowDomain) url.searchParams.append('allowDomain', d);
  const headers: Record<string, string> = {
    authorization: `Bearer ${cfg.apiKey}`,
    'content-type': 'application/gzip',
  };
  if (cfg.workspace) headers['x-service-workspace'] = cfg.workspace;
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: Readable.toWeb(contextStream(dir, dockerfile)) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  if (!res.ok || !res.body) {
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = { detail: `HTTP ${res.status}: ${text.slice(0, 200)}` };
    }
    throw new ApiFailure(res.status, body);
  }
  let held = '';
  let failed: string | undefined;
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    held += decoder.decode(chunk, { stream: true });
    for (let nl = held.indexOf('\n'); nl >= 0; nl = held.indexOf('\n')) {
      const line = held.slice(0, nl);
      held = held.slice(nl + 1);
      if (!line.trim()) continue;
      const m = JSON.parse(line);
      if (typeof m.stream === 'string' && !o.quiet) process.stdout.write(m.stream);
      if (m.aux?.ID && o.quiet) process.stdout.write(`${m.aux.ID}\n`);
      if (typeof m.error === 'string') failed = m.error;
    }
  }
  if (failed) throw new Error(failed);
}

export function registerImageBuild(image: Command) {
  image
    .command('build <dir>')
    .description('build an image from a Dockerfile in <dir> (the build context) and name it in the workspace')
    .requiredOption('-t, --tag <name>', 'the name to give the image, e.g. app:1')
    .option('-f, --file <path>', 'the Dockerfile, relative to <dir> (default: Dockerfile)')
    .option(
      '--build-arg <NAME=value>',
      'a build argument (repeatable; NAME alone takes it from the environment)',
      collect,
      [],
    )
    .option('--target <stage>', 'the stage to build (default: the last)')
    .option('--no-cache', 'run every step again')
    .option('--network <mode>', 'default, or none: what RUN steps may reach')
    .option('--allow-domain <domain>', 'RUN steps reach only these domains (repeatable)', collect, [])
    .option('-q, --quiet', 'print only the image id')
    .action((dir: string, o: BuildOptions) => buildCommand(dir, o));
}
