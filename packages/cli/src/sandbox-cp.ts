// `berth sandbox cp <src> <dst>`: copies one file into or out of a sandbox; the sandbox side is written
// `name:/path` (relative paths are under the sandbox's working directory, `~` is its home).
import { openAsBlob, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Command } from 'commander';
import { loadCliConfig } from './config.js';
import { encodePath, failure, openSandbox } from './sandbox-client.js';

export interface RemotePath {
  sandbox: string;
  path: string;
}

/** `box:/tmp/x` → {sandbox, path}; a local path (including `./a:b` or `/abs:x`) → undefined. */
export function parseRemote(arg: string): RemotePath | undefined {
  const m = /^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?):(.*)$/.exec(arg);
  if (!m) return undefined;
  return { sandbox: m[1], path: m[3] || '.' };
}

const isDir = (p: string) => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

export function registerSandboxCp(sandbox: Command) {
  sandbox
    .command('cp')
    .description('copy a file into or out of a sandbox (e.g. `berth sandbox cp ./a.txt box:/tmp/a.txt`)')
    .argument('<src>', 'local path or <sandbox>:<path>')
    .argument('<dst>', 'local path or <sandbox>:<path>')
    .action(async (src: string, dst: string) => {
      const from = parseRemote(src);
      const to = parseRemote(dst);
      if (!!from === !!to) throw new Error('one side must be <sandbox>:<path> and the other a local path');
      const cfg = loadCliConfig();
      if (to) await upload(cfg, src, to);
      else await download(cfg, from!, dst);
    });
}

async function upload(cfg: ReturnType<typeof loadCliConfig>, local: string, to: RemotePath) {
  if (isDir(local)) throw new Error(`${local} is a directory; cp copies one file`);
  const sb = await openSandbox(cfg, to.sandbox);
  const path = to.path.endsWith('/') ? `${to.path}${basename(local)}` : to.path;
  const form = new FormData();
  // The blob reads the file as the request is sent: large files are not loaded into memory first.
  form.set('file', await openAsBlob(local), basename(local));
  form.set('permissions', (statSync(local).mode & 0o777).toString(8).padStart(4, '0'));
  const res = await fetch(`${sb.url}/filesystem/${encodePath(path)}`, {
    method: 'PUT',
    headers: sb.headers,
    body: form,
  });
  if (!res.ok) throw await failure(res, `upload to ${to.sandbox}:${path}`);
}

async function download(cfg: ReturnType<typeof loadCliConfig>, from: RemotePath, local: string) {
  const sb = await openSandbox(cfg, from.sandbox);
  const res = await fetch(`${sb.url}/filesystem/${encodePath(from.path)}?download=true`, {
    headers: { ...sb.headers, accept: 'application/octet-stream' },
  });
  if (!res.ok || !res.body) throw await failure(res, `download of ${from.sandbox}:${from.path}`);
  const target = isDir(local) ? join(local, basename(from.path)) : local;
  const out = await open(target, 'w');
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) await out.write(chunk);
  } finally {
    await out.close();
  }
}
