// Agents and MCP servers (functions) from the command line, beside `berth deploy`:
// `berth run agent <name> --data '{…}' [--thread id] [--path /sub]` calls it through the gateway and prints the
// answer as it streams; `berth get revisions agent <name>` lists its revisions; `berth rollback agent <name> <rev>`
// makes an older revision take all traffic; `berth logs agent|function <name> [--build] [-f]` prints the replicas'
// output or a build log.
import type { Command } from 'commander';
import { Api, ApiFailure, openStream } from './client.js';
import { type CliConfig, loadCliConfig } from './config.js';
import { readData } from './run-model.js';

/** How often rollback reads the status while waiting for the revision to serve. */
const POLL_MS = 500;
/** Longest a rollback waits: the older revision's app is built already, only a replica starts. */
const ROLLBACK_WAIT_MS = 5 * 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

export async function listRevisions(kind: string, name: string) {
  const plural = workloadPlural(kind);
  const { body } = await new Api(loadCliConfig()).call(
    'GET',
    `/${plural}/${encodeURIComponent(name)}/revisions`,
  );
  const items: any[] = Array.isArray(body) ? body : (body?.data ?? []);
  if (!items.length) process.stderr.write('no revisions yet\n');
  for (const r of items)
    process.stdout.write(`${r.id}  ${r.createdAt}  ${r.active ? 'active ' : '       '} ${r.start}\n`);
}

/** Makes `rev` the active revision with all traffic (a canary is dropped), and waits until it serves. */
async function rollback(kind: string, name: string, rev: string) {
  const plural = workloadPlural(kind);
  const api = new Api(loadCliConfig());
  const path = `/${plural}/${encodeURIComponent(name)}`;
  const { body: cur } = await api.call('GET', path);
  await api.call('PUT', path, {
    body: { metadata: { name }, spec: { ...cur.spec, revision: { active: rev } } },
  });
  const deadline = Date.now() + ROLLBACK_WAIT_MS;
  for (;;) {
    const { body: o } = await api.call('GET', path);
    if (o.status === 'DEPLOYED' && o.activeRevision === rev && !o.canaryRevision) {
      process.stdout.write(`revision ${rev} takes all traffic\n`);
      return;
    }
    if (o.status === 'FAILED') {
      process.stderr.write(`${(o.events ?? []).at(-1)?.message ?? 'failed'}\n`);
      process.exitCode = 1;
      return;
    }
    if (Date.now() > deadline) throw new Error(`still ${o.status} after ${ROLLBACK_WAIT_MS / 60000} minutes`);
    await sleep(POLL_MS);
  }
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
    .command('rollback')
    .description('make an earlier revision of an agent or function take all traffic')
    .argument('<kind>', 'agent or function')
    .argument('<name>', 'its name')
    .argument('<revision>', 'revision id (berth get revisions agent <name>)')
    .action((kind: string, name: string, rev: string) => rollback(kind, name, rev));
}
