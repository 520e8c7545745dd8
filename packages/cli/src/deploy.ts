// `berth deploy [dir]`: reads berth.toml (or blaxel.toml), creates or replaces the agent or function with
// `?upload=true`, PUTs the packed source to the upload URL the server answers, then follows the status
// (UPLOADING → BUILDING → BUILT → DEPLOYING → DEPLOYED) and prints the inference URL; on FAILED it prints the
// build log's last lines and exits 1. The build log is streamed while the build runs. `--traffic N` ships the new
// revision as a canary with N% of the requests (the active one keeps the rest) instead of all of it.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { parse } from 'smol-toml';
import { Api, ApiFailure } from './client.js';
import { loadCliConfig } from './config.js';
import { packSource } from './package-source.js';
import { printBuildLog } from './workloads.js';

/** How often the status is read while waiting. */
const POLL_MS = 500;
/** Longest `deploy` waits for DEPLOYED (builds are bounded at 15 minutes on the server). */
const WAIT_MS = 20 * 60_000;
/** Upload attempts, with a fresh URL each (the service's CLI retries the same way). */
const UPLOAD_ATTEMPTS = 5;

const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63) || 'app';

function readManifest(dir: string): Record<string, any> {
  for (const f of ['berth.toml', 'blaxel.toml'])
    if (existsSync(join(dir, f))) return parse(readFileSync(join(dir, f), 'utf8')) as Record<string, any>;
  return {};
}

/** The object the manifest describes: kind path and body. */
export function manifestObject(dir: string, nameFlag?: string, kindFlag?: string) {
  const m = readManifest(dir);
  const declared = kindFlag ?? m.type;
  const type =
    declared === 'function' || declared === 'mcp' ? 'functions' : declared === 'job' ? 'jobs' : 'agents';
  const name = slug(nameFlag ?? m.name ?? basename(resolve(dir)));
  const rt = (m.runtime ?? {}) as Record<string, unknown>;
  const runtime: Record<string, unknown> = {};
  const fields =
    type === 'jobs'
      ? ['memory', 'maxConcurrentTasks', 'maxRetries', 'timeout']
      : ['memory', 'minScale', 'maxScale', 'timeout'];
  for (const k of fields) if (typeof rt[k] === 'number') runtime[k] = rt[k];
  // The image the code is built on and runs on (one the workspace pulled or imported; default: the base image).
  if (typeof rt.image === 'string') runtime.image = rt.image;
  const spec: Record<string, unknown> = { repository: { type: 'upload' }, runtime };
  if (typeof m.public === 'boolean' && type !== 'jobs') spec.public = m.public;
  // `[[triggers]]` of an agent or function (the service's manifests declare their http paths there).
  if (Array.isArray(m.triggers) && type !== 'jobs') spec.triggers = m.triggers;
  if (type === 'functions') spec.type = 'mcp';
  return { plural: type, name, body: { metadata: { name }, spec } };
}

interface DeployOptions {
  name?: string;
  kind?: string;
  traffic?: string;
  wait: boolean;
}

/** Once the new revision is built and deployed at 0%: it becomes the canary with `percent` of the requests. */
async function shipCanary(api: Api, path: string, o: any, stable: string, percent: number, deadline: number) {
  const fresh: string | undefined = o.revisions?.[0]?.id;
  if (!fresh || fresh === stable) {
    process.stdout.write(`nothing new to ship: revision ${stable} keeps all traffic\n`);
    return;
  }
  const revision = { active: stable, canary: fresh, canaryPercent: percent };
  await api.call('PUT', path, {
    body: { metadata: { name: o.metadata.name }, spec: { ...o.spec, revision } },
  });
  for (;;) {
    const { body: cur } = await api.call('GET', path);
    if (cur.status === 'DEPLOYED' && cur.canaryRevision === fresh) {
      process.stdout.write(`revision ${fresh} takes ${percent}% (canary), ${stable} the rest\n`);
      process.stdout.write(`${cur.metadata?.url ?? ''}\n`);
      return;
    }
    if (cur.status === 'FAILED') {
      process.stderr.write(`${(cur.events ?? []).at(-1)?.message ?? 'failed'}\n`);
      process.exitCode = 1;
      return;
    }
    if (Date.now() > deadline) throw new Error(`still ${cur.status} after ${WAIT_MS / 60000} minutes`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

export function registerDeploy(program: Command) {
  program
    .command('deploy [dir]')
    .description('build and deploy an agent or MCP server from a directory (berth.toml / blaxel.toml)')
    .option('--name <name>', 'object name (default: the manifest name, else the directory name)')
    .option('--kind <kind>', 'agent, function or job (default: the manifest type, else agent)')
    .option('--traffic <percent>', 'ship the new revision as a canary taking this share of requests (1-99)')
    .option('--no-wait', 'return once the code is uploaded')
    .action(async (dirArg: string | undefined, opts: DeployOptions) => {
      const dir = resolve(dirArg ?? '.');
      const cfg = loadCliConfig();
      const api = new Api(cfg);
      const { plural, name, body } = manifestObject(dir, opts.name, opts.kind);
      const traffic = opts.traffic === undefined ? undefined : Number(opts.traffic);
      if (traffic !== undefined && !(Number.isInteger(traffic) && traffic >= 1 && traffic <= 99))
        throw new Error(
          `--traffic wants a whole percentage from 1 to 99, got ${JSON.stringify(opts.traffic)}`,
        );
      if (traffic !== undefined && (plural === 'jobs' || !opts.wait))
        throw new Error('--traffic applies to agents and functions, and waits for the deploy (no --no-wait)');
      const packed = await packSource(dir);
      process.stdout.write(
        `packed ${packed.files.length} files (${packed.zip.length} bytes, ${packed.digest})\n`,
      );
      // A pinned revision or a canary set on the server stays: a deploy adds a revision, it does not reset traffic.
      let before: any;
      try {
        ({ body: before } = await api.call('GET', `/${plural}/${name}`));
        if (before?.spec?.revision) (body.spec as Record<string, unknown>).revision = before.spec.revision;
        // Triggers set on the server stay too, unless the manifest declares its own.
        if (plural !== 'jobs' && before?.spec?.triggers && !(body.spec as Record<string, unknown>).triggers)
          (body.spec as Record<string, unknown>).triggers = before.spec.triggers;
        // So do volumes: the manifest has no place for them (they are set with the API or `berth apply`).
        if (before?.spec?.volumes) (body.spec as Record<string, unknown>).volumes = before.spec.volumes;
      } catch (e) {
        if (!(e instanceof ApiFailure && e.status === 404)) throw e;
      }
      // A canary deploy pins the serving revision first, so the new one goes in at 0% until it gets its share.
      const stable: string | undefined = traffic !== undefined ? before?.activeRevision : undefined;
      if (traffic !== undefined && !stable)
        process.stdout.write('no revision serves yet: this first one takes all traffic\n');
      if (stable) (body.spec as Record<string, unknown>).revision = { active: stable };
      let uploaded = false;
      let fresh = false;
      for (let attempt = 1; !uploaded; attempt++) {
        const put = await api.call('PUT', `/${plural}/${name}`, { body, query: { upload: 'true' } });
        const url = put.headers.get('x-blaxel-upload-url');
        if (!url) throw new Error('the server gave no upload URL');
        const res = await fetch(url, {
          method: 'PUT',
          headers: { 'content-type': 'application/zip' },
          body: new Uint8Array(packed.zip),
        });
        const text = await res.text();
        if (res.ok) {
          const r = JSON.parse(text);
          process.stdout.write(
            r.alreadyPresent ? 'upload: already present, nothing new to build\n' : 'uploaded\n',
          );
          uploaded = true;
          fresh = !r.alreadyPresent;
        } else if (res.status < 500 || attempt >= UPLOAD_ATTEMPTS) {
          let problem: any;
          try {
            problem = JSON.parse(text);
          } catch {
            problem = { detail: text };
          }
          throw new ApiFailure(res.status, problem);
        } else await new Promise((r) => setTimeout(r, 1000 * 2 ** (attempt - 1)));
      }
      if (!opts.wait) return;
      const deadline = Date.now() + WAIT_MS;
      let last = '';
      if (fresh) {
        process.stdout.write('BUILDING\n');
        last = 'BUILDING';
        try {
          await printBuildLog(cfg, plural, name, 'latest', true);
        } catch (e) {
          // Built already (the same source elsewhere) or not started: the status below tells what happens.
          if (!(e instanceof ApiFailure && e.status === 404)) throw e;
        }
      }
      for (;;) {
        const { body: o } = await api.call('GET', `/${plural}/${name}`);
        if (o.status !== last) {
          process.stdout.write(`${o.status}\n`);
          last = o.status;
        }
        if (o.status === 'DEPLOYED') {
          if (stable) return shipCanary(api, `/${plural}/${name}`, o, stable, traffic ?? 0, deadline);
          process.stdout.write(`${o.metadata?.url ?? ''}\n`);
          return;
        }
        if (o.status === 'FAILED') {
          process.stderr.write(`${(o.events ?? []).at(-1)?.message ?? 'failed'}\n`);
          process.exitCode = 1;
          return;
        }
        if (Date.now() > deadline) throw new Error(`still ${o.status} after ${WAIT_MS / 60000} minutes`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    });
}
