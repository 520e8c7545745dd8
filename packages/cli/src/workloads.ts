// Agents and MCP servers (functions) from the command line, beside `berth deploy`:
// `berth run agent <name> --data '{…}' [--thread id] [--path /sub]` calls it through the gateway and prints the
// answer as it streams; `berth get revisions agent <name>` lists its revisions and the share each takes;
// `berth promote agent <name> [rev]` (and its other name for an older revision, `berth rollback`) gives a revision all
// traffic; `berth logs agent|function <name> [--build] [-f]` prints the replicas' output or a build log.
import { kindByName } from '@berth/sdk';
import type { Command } from 'commander';
import { Api, ApiFailure, openStream } from './client.js';
import { shortRevision } from './columns.js';
import { type CliConfig, loadCliConfig } from './config.js';
import { age } from './format.js';
import { type Format, renderData, renderTable } from './output.js';
import { Progress } from './progress.js';
import { readData } from './run-model.js';
import { shareOf } from './traffic.js';
import { outcomeLine, waitFor } from './wait.js';

/** Longest a promotion waits: the revision's app is built already, only a replica starts. */
const PROMOTE_WAIT_MS = 5 * 60_000;

/** `agent` / `agents` → `agents`; `function` / `mcp` → `functions`. */
export function workloadPlural(kind: string): 'agents' | 'functions' {
  if (/^agents?$/.test(kind)) return 'agents';
  if (/^(functions?|mcp)$/.test(kind)) return 'functions';
  throw new Error(`expected agent or function, got ${JSON.stringify(kind)}`);
}

/** The run address of a workload: the server's origin + `/run/<workspace>/<plural>/<name><path>`. */
export function workloadRunUrl(cfg: CliConfig, workspace: string, plural: string, name: string, path = '') {
  const origin = cfg.url.replace(/\/+$/, '').replace(/\/v0$/, '');
  const sub = path && !path.startsWith('/') ? `/${path}` : path;
  return `${origin}/run/${encodeURIComponent(workspace)}/${plural}/${encodeURIComponent(name)}${sub}`;
}

/** Copies a streamed answer to stdout as it comes. */
async function pipeOut(res: Response) {
  for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) process.stdout.write(chunk);
}

/** Prints a build log (`rev` or the latest build); with `follow`, until the build ends. */
export async function printBuildLog(
  cfg: CliConfig,
  plural: string,
  name: string,
  rev = 'latest',
  follow = false,
) {
  const path = `/${plural}/${encodeURIComponent(name)}/revisions/${encodeURIComponent(rev)}/logs`;
  await pipeOut(await openStream(cfg, path, follow ? { follow: 'true' } : {}));
}

/** `berth logs agent|function <name>`: the build log with --build, else the replicas' output; -f follows. */
export async function workloadLogs(
  kind: string,
  name: string,
  o: { build?: string | boolean; follow?: boolean },
) {
  const plural = workloadPlural(kind);
  const cfg = loadCliConfig();
  if (o.build !== undefined && o.build !== false)
    return printBuildLog(cfg, plural, name, o.build === true ? 'latest' : o.build, o.follow);
  await pipeOut(
    await openStream(cfg, `/${plural}/${encodeURIComponent(name)}/logs`, o.follow ? { follow: 'true' } : {}),
  );
}

async function runWorkload(
  kind: string,
  name: string,
  o: { data?: string; thread?: string; path?: string; method?: string },
) {
  const plural = workloadPlural(kind);
  const cfg = loadCliConfig();
  const { body: obj } = await new Api(cfg).call('GET', `/${plural}/${encodeURIComponent(name)}`);
  const workspace = obj?.metadata?.workspace ?? cfg.workspace ?? 'default';
  const body = o.data === undefined ? undefined : await readData(o.data);
  const headers: Record<string, string> = { authorization: `Bearer ${cfg.apiKey}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (o.thread) headers['x-blaxel-thread-id'] = o.thread;
  const res = await fetch(workloadRunUrl(cfg, workspace, plural, name, o.path), {
    method: (o.method ?? (body === undefined ? 'GET' : 'POST')).toUpperCase(),
    headers,
    body,
  });
  if (!res.ok) {
    const text = await res.text();
    let problem: any;
    try {
      problem = JSON.parse(text);
    } catch {
      problem = { detail: `HTTP ${res.status}: ${text.slice(0, 500)}` };
    }
    throw new ApiFailure(res.status, problem);
  }
  await pipeOut(res);
}

const TRAFFIC: Record<string, string> = { all: '100%', canary: 'canary', active: 'active', none: '0%' };

/** `berth get revisions agent <name>`: each kept revision, newest first, with the share of traffic it takes. */
export async function listRevisions(kind: string, name: string, format: Format = 'table') {
  const plural = workloadPlural(kind);
  const api = new Api(loadCliConfig());
  const path = `/${plural}/${encodeURIComponent(name)}`;
  const [{ body }, { body: o }] = await Promise.all([
    api.call('GET', `${path}/revisions`),
    api.call('GET', path),
  ]);
  const items: any[] = Array.isArray(body) ? body : (body?.data ?? []);
  if (format === 'json' || format === 'yaml') return void process.stdout.write(renderData(items, format));
  if (!items.length) return void process.stderr.write(`no revisions of ${kind} ${name} yet\n`);
  const pct = o?.spec?.revision?.canaryPercent ?? 0;
  const traffic = (id: string) => {
    const share = shareOf(o, id);
    return share === 'canary' ? `${pct}%` : share === 'active' ? `${100 - pct}%` : TRAFFIC[share];
  };
  const columns = [
    { head: 'REVISION', cell: (r: any) => String(r.id) },
    { head: 'TRAFFIC', cell: (r: any) => traffic(r.id) },
    { head: 'AGE', cell: (r: any) => age(r.createdAt) },
    { head: 'START', cell: (r: any) => String(r.start ?? '-') },
    ...(format === 'wide' ? [{ head: 'CREATED', cell: (r: any) => String(r.createdAt ?? '-') }] : []),
  ];
  process.stdout.write(`${renderTable(items, columns)}\n`);
}

/**
 * Makes `rev` (default: the newest revision) the active one with all traffic, dropping a canary, and waits through
 * the watch until it serves. A revision that takes all traffic already is said, and nothing is written.
 */
async function promote(kind: string, name: string, rev: string | undefined) {
  const plural = workloadPlural(kind);
  const kd = kindByName(plural)!;
  const cfg = loadCliConfig();
  const api = new Api(cfg);
  const path = `/${plural}/${encodeURIComponent(name)}`;
  const { body: cur } = await api.call('GET', path);
  const id: string | undefined = rev ?? cur.revisions?.[0]?.id;
  if (!id) throw new Error(`${kind} ${name} has no revision yet: \`berth deploy\` builds one`);
  if (cur.status === 'DEPLOYED' && shareOf(cur, id) === 'all' && cur.spec?.revision?.active === id) {
    process.stderr.write(`revision ${id} takes all traffic already: nothing changed\n`);
    return;
  }
  await api.call('PUT', path, {
    body: { metadata: { name }, spec: { ...cur.spec, revision: { active: id } } },
  });
  const progress = new Progress();
  progress.phase(`moving all traffic to ${shortRevision(id)}`);
  const outcome = await waitFor(
    cfg,
    kd,
    `/${plural}`,
    name,
    progress,
    PROMOTE_WAIT_MS,
    (o) =>
      o?.status === 'FAILED' || (o?.status === 'DEPLOYED' && o?.activeRevision === id && !o?.canaryRevision),
  ).finally(() => progress.stop());
  if (outcome.failed) {
    const { line, exitCode } = outcomeLine(kd, outcome);
    process.stderr.write(`${line}\n`);
    process.exitCode = exitCode;
    return;
  }
  process.stdout.write(`revision ${id} takes all traffic\n`);
}

export function registerWorkloads(program: Command) {
  const run =
    program.commands.find((c) => c.name() === 'run') ?? program.command('run').description('call a workload');
  for (const kind of ['agent', 'function'])
    run
      .command(kind)
      .description(
        `call ${kind === 'agent' ? 'an agent' : 'an MCP server'} through the gateway, printing the answer as it streams`,
      )
      .argument('<name>', `${kind} name`)
      .option('-d, --data <json>', 'request body: JSON, @file.json, or - for stdin')
      .option(
        '--thread <id>',
        'thread id (X-Blaxel-Thread-Id): the same replica and revision answer a thread',
      )
      .option('--path <path>', 'path after the inference address (e.g. /mcp)')
      .option('-X, --method <method>', 'HTTP method (default POST with a body, GET without)')
      .action((name: string, o) => runWorkload(kind, name, o));
  program
    .command('promote')
    .description(
      'give a revision of an agent or function all traffic (default: the newest), dropping a canary',
    )
    .argument('<kind>', 'agent or function')
    .argument('<name>', 'its name')
    .argument('[revision]', 'revision id (berth get revisions agent <name>); default: the newest')
    .action((kind: string, name: string, rev?: string) => promote(kind, name, rev));
  program
    .command('rollback')
    .description('give an earlier revision of an agent or function all traffic (as `promote` does)')
    .argument('<kind>', 'agent or function')
    .argument('<name>', 'its name')
    .argument('<revision>', 'revision id (berth get revisions agent <name>)')
    .action((kind: string, name: string, rev: string) => promote(kind, name, rev));
}
