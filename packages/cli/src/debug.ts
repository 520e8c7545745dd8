// `berth debug <kind> <name>`: what is wrong with an object, in one screen — the most likely cause first, then its
// status, its runtime instances against their limits (memory, tasks, disk), its daemon's health and last lines,
// its egress policy, and its recent events (GET /v0/<kind>/{name}/debug, decision 050).
import type { Command } from 'commander';
import { Api, addParentFlags, collectionPath, itemPath, resolveKind } from './client.js';
import { loadCliConfig } from './config.js';

const mb = (bytes: number) => {
  const v = bytes / (1024 * 1024);
  return `${v >= 10 ? Math.round(v) : v.toFixed(1)} MB`;
};

const indent = (lines: string[], by = '    ') => lines.map((l) => `${by}${l}`);

/** The report as a person reads it (every field the server answered, in the order a diagnosis goes). */
export function renderDebug(r: any): string {
  const out: string[] = [];
  const head = [r.status, r.state].filter(Boolean).join(', ');
  out.push(`${r.kind.toLowerCase()} ${r.name} (workspace ${r.workspace})${head ? `: ${head}` : ''}`);
  out.push(`cause: ${r.cause}`);
  for (const i of r.instances ?? []) {
    out.push('');
    const since = i.createdAt ? `, started ${i.createdAt}` : '';
    out.push(`${i.role} ${i.id}: ${i.state}${since}${i.address ? `, address ${i.address}` : ''}`);
    const rows: string[] = [];
    if (i.memory)
      rows.push(
        `memory   ${mb(i.memory.usedBytes)} of ${mb(i.memory.limitBytes)} (peak ${mb(i.memory.peakBytes)}), ${i.memory.oomKills} ended by the out-of-memory killer`,
      );
    if (i.pids) rows.push(`tasks    ${i.pids.current} of ${i.pids.max}`);
    if (i.disk)
      rows.push(`disk     ${mb(i.disk.usedBytes)} of ${mb(i.disk.limitBytes)} (its files, held in memory)`);
    const d = i.daemon;
    rows.push(
      d.answered
        ? `daemon   answers: version ${d.version}, up ${Math.round(d.uptimeSeconds ?? 0)}s, ${d.runningProcesses} processes running (${d.keepAliveProcesses} keeping it awake)`
        : `daemon   does not answer: ${d.error ?? 'no answer'}`,
    );
    if (i.app)
      rows.push(
        `app      ${i.app.status}${i.app.status === 'running' ? '' : `, exit code ${i.app.exitCode}`}`,
        ...indent(i.app.lastOutput.length ? i.app.lastOutput : ['(no output)'], '           '),
      );
    out.push(...indent(rows, '  '));
    out.push('  daemon log (last lines):');
    out.push(...indent(i.daemonLog.length ? i.daemonLog : ['(empty)']));
  }
  if (r.network) {
    const n = r.network;
    out.push('');
    out.push(
      `network: egress ${n.egress ?? 'direct'}; allowed ${n.allowedDomains?.join(', ') || 'any'}; forbidden ${n.forbiddenDomains?.join(', ') || 'none'}; proxy ${n.proxy}`,
    );
  }
  out.push('');
  out.push('recent events:');
  out.push(
    ...indent(
      (r.events ?? []).map((e: any) => `${e.time ?? ''}  ${(e.status ?? '').padEnd(10)} ${e.message}`.trim()),
      '  ',
    ),
  );
  out.push('');
  out.push(`(gathered in ${r.tookMs} ms)`);
  return `${out.join('\n')}\n`;
}

export function registerDebug(program: Command) {
  const cmd = program
    .command('debug')
    .description(
      'what is wrong with an object: the likely cause, status and events, its instances against their limits, its daemon, its network (e.g. `berth debug sandbox box`)',
    )
    .argument('<kind>', 'kind: plural, singular or alias (sandbox, agent, function, job, model, ...)')
    .argument('<name>', 'object name')
    .option('-o, --output <format>', 'json (default: text)');
  addParentFlags(cmd).action(async (kindName: string, name: string, o: { output?: string }) => {
    const kd = resolveKind(kindName);
    if (o.output !== undefined && o.output !== 'json')
      throw new Error(`unknown output format ${JSON.stringify(o.output)}: use json`);
    const api = new Api(loadCliConfig());
    const { body } = await api.call('GET', `${itemPath(collectionPath(kd, o), name)}/debug`);
    process.stdout.write(o.output === 'json' ? `${JSON.stringify(body, null, 2)}\n` : renderDebug(body));
  });
}
