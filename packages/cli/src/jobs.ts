// Jobs from the command line: `berth run job <name> --tasks tasks.json` starts an execution and shows its progress
// until it ends (exit 1 unless it succeeded), `berth get executions job <name>` lists executions,
// `berth logs job <name> --execution <id> [--task N] [-f]` prints task logs, `berth cancel execution <job> <id>`
// (which says so, and changes nothing, when the execution had ended already).
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { Api, listAll, openStream } from './client.js';
import { loadCliConfig } from './config.js';
import { age } from './format.js';
import { type Format, renderData, renderTable } from './output.js';
import { parseEnvs } from './flags.js';
import { workloadLogs } from './workloads.js';

/** How often progress is read. */
const POLL_MS = 1000;
const DONE = new Set(['succeeded', 'failed', 'cancelled']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function readTasks(file: string | undefined): unknown[] {
  if (!file) return [{}];
  const text = file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8');
  const v = JSON.parse(text);
  if (!Array.isArray(v)) throw new Error(`${file}: expected a JSON array of task inputs`);
  return v;
}

const progress = (e: any) => {
  const s = e.stats ?? {};
  return `${e.status}: ${s.success ?? 0} succeeded, ${s.failure ?? 0} failed, ${s.running ?? 0} running, ${s.pending ?? 0} waiting, ${s.retried ?? 0} retries (of ${s.total ?? 0})`;
};

export async function runJob(
  name: string,
  o: { tasks?: string; env?: string[]; memory?: string; wait: boolean },
) {
  const api = new Api(loadCliConfig());
  const env = Object.fromEntries(parseEnvs(o.env).map((e) => [e.name, e.value]));
  const body: Record<string, unknown> = { tasks: readTasks(o.tasks) };
  if (Object.keys(env).length) body.env = env;
  if (o.memory) body.memory = Number(o.memory);
  const { body: created } = await api.call('POST', `/jobs/${name}/executions`, { body });
  const id = created.executionId;
  process.stdout.write(`execution ${id}\n`);
  if (!o.wait) return;
  let last = '';
  for (;;) {
    const { body: e } = await api.call('GET', `/jobs/${name}/executions/${id}`);
    const line = progress(e);
    if (line !== last) process.stdout.write(`${line}\n`);
    last = line;
    if (DONE.has(e.status)) {
      for (const t of e.tasks ?? [])
        if (t.status !== 'succeeded')
          process.stderr.write(`task ${t.index}: ${t.status} after ${t.attempts} attempt(s)\n`);
      if (e.status !== 'succeeded') process.exitCode = 1;
      return;
    }
    await sleep(POLL_MS);
  }
}

/** `berth get executions job <name>`: every execution, as a table, JSON or YAML. */
async function listExecutions(name: string, format: Format = 'table') {
  const items = await listAll(new Api(loadCliConfig()), `/jobs/${encodeURIComponent(name)}/executions`);
  if (format === 'json' || format === 'yaml') return void process.stdout.write(renderData(items, format));
  if (!items.length) return void process.stderr.write(`no executions of job ${name} yet\n`);
  const stat = (k: string) => (e: any) => String(e.stats?.[k] ?? 0);
  const columns = [
    { head: 'ID', cell: (e: any) => String(e.metadata?.id) },
    { head: 'STATUS', cell: (e: any) => String(e.status ?? '-') },
    { head: 'TASKS', cell: stat('total') },
    { head: 'SUCCEEDED', cell: stat('success') },
    { head: 'FAILED', cell: stat('failure') },
    { head: 'RUNNING', cell: stat('running') },
    { head: 'WAITING', cell: stat('pending') },
    { head: 'AGE', cell: (e: any) => age(e.metadata?.createdAt) },
    ...(format === 'wide'
      ? [
          { head: 'RETRIES', cell: stat('retried') },
          { head: 'REVISION', cell: (e: any) => String(e.revision ?? '-') },
        ]
      : []),
  ];
  process.stdout.write(`${renderTable(items, columns)}\n`);
}

async function logs(name: string, o: { execution: string; task?: string; follow?: boolean }) {
  const cfg = loadCliConfig();
  const api = new Api(cfg);
  const { body: e } = await api.call('GET', `/jobs/${name}/executions/${o.execution}`);
  const indexes: number[] =
    o.task !== undefined ? [Number(o.task)] : (e.tasks ?? []).map((t: any) => t.index);
  const path = (i: number) => `/jobs/${name}/executions/${o.execution}/tasks/${i}/logs`;
  const label = (i: number, text: string) =>
    indexes.length > 1 ? text.replace(/^(?=.)/gm, `[${i}] `) : text;
  if (!o.follow) {
    for (const i of indexes) process.stdout.write(label(i, (await api.call('GET', path(i))).text));
    return;
  }
  // Every task followed at once (each stream ends with its task); whole lines only, so labels stay at line starts.
  await Promise.all(
    indexes.map(async (i) => {
      const res = await openStream(cfg, path(i), { follow: 'true' });
      const dec = new TextDecoder();
      let held = '';
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        held += dec.decode(chunk, { stream: true });
        const cut = indexes.length > 1 ? held.lastIndexOf('\n') + 1 : held.length;
        if (cut > 0) process.stdout.write(label(i, held.slice(0, cut)));
        held = held.slice(cut);
      }
      held += dec.decode();
      if (held) process.stdout.write(label(i, held.endsWith('\n') ? held : `${held}\n`));
    }),
  );
}

export function registerJobs(program: Command) {
  const run =
    program.commands.find((c) => c.name() === 'run') ?? program.command('run').description('call a workload');
  run
    .command('job')
    .description('start an execution of a job and show its progress until it ends')
    .argument('<name>', 'job name')
    .option('--tasks <file>', 'JSON array of task inputs (- for stdin); default one task with {}')
    .option('--env <NAME=value...>', 'environment override for this execution')
    .option('--memory <mb>', 'memory override for this execution (MB)')
    .option('--no-wait', 'print the execution id and return')
    .action((name: string, o) => runJob(name, o));
  program
    .command('logs')
    .description('print the logs of a job execution (every task, or one with --task)')
    .argument('<kind>', 'job, agent or function')
    .argument('<name>', 'job name')
    .option('--execution <id>', 'execution id (jobs)')
    .option('--task <index>', 'one task')
    .option('-f, --follow', 'print output live as tasks run, until they end')
    .option('--build [revision]', 'agents and functions: the build log (of the latest build, or a revision)')
    .action((kind: string, name: string, o) => {
      if (kind !== 'job') return workloadLogs(kind, name, o);
      if (!o.execution) throw new Error('berth logs job: --execution <id> is required');
      return logs(name, o);
    });
  program
    .command('cancel')
    .description('cancel a job execution: running tasks get SIGTERM, then SIGKILL')
    .argument('<what>', 'execution')
    .argument('<job>', 'job name')
    .argument('<id>', 'execution id')
    .action(async (what: string, job: string, id: string) => {
      if (what !== 'execution')
        throw new Error('berth cancel: only `berth cancel execution <job> <id>` exists');
      const api = new Api(loadCliConfig());
      const path = `/jobs/${encodeURIComponent(job)}/executions/${encodeURIComponent(id)}`;
      const { body: was } = await api.call('GET', path);
      if (DONE.has(was.status)) {
        process.stderr.write(`execution ${id} had already ended (${was.status}): nothing was cancelled\n`);
        return;
      }
      const { body } = await api.call('DELETE', path);
      process.stdout.write(`execution ${id} ${body.status}\n`);
    });
}

/** `berth get executions job <name>`, reached from `berth get`. */
export const getExecutions = listExecutions;
