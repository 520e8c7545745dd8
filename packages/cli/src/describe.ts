// `berth describe <kind> <name> [--watch]`: one object for a person — its status and the reason for it, its address,
// for agents and functions which revision takes which share of the traffic, its spec, and its events, oldest first.
// `--watch` then prints each new event (and the object's removal) as it happens, from the server's watch.
import type { KindInfo } from '@berth/sdk';
import type { Command } from 'commander';
import { Api, addParentFlags, collectionPath, itemPath, resolveKind, watch } from './client.js';
import { addressOf, reasonOf, shortRevision } from './columns.js';
import { loadCliConfig } from './config.js';
import { age, table } from './format.js';
import { yaml } from './output.js';
import { paint, paintStatus } from './style.js';
import { trafficNote } from './traffic.js';

const out = process.stdout;

const indent = (text: string, n = 2) =>
  text
    .trimEnd()
    .split('\n')
    .map((l) => `${' '.repeat(n)}${l}`)
    .join('\n');

/** `Name:  value` lines, the values aligned. */
function fields(pairs: [string, string | undefined][]) {
  const shown = pairs.filter(([, v]) => v !== undefined && v !== '');
  const w = Math.max(...shown.map(([k]) => k.length)) + 2;
  return shown.map(([k, v]) => `${`${k}:`.padEnd(w)}${v}`).join('\n');
}

/** Who takes the traffic of an agent or function, and its kept revisions. */
function revisions(o: any): string {
  const list: any[] = Array.isArray(o?.revisions) ? o.revisions : [];
  if (!list.length) return '';
  const pct = o?.canaryRevision ? (o?.spec?.revision?.canaryPercent ?? 0) : 0;
  const share = (id: string) =>
    id === o.activeRevision ? `${100 - pct}%` : id === o.canaryRevision && pct ? `${pct}% (canary)` : '0%';
  const rows = [['REVISION', 'TRAFFIC', 'AGE', 'START']];
  for (const r of list) rows.push([shortRevision(r.id), share(r.id), age(r.createdAt), r.start ?? '-']);
  return `Revisions:\n${indent(table(rows))}\n`;
}

/** The events past `last` (the object keeps only its newest events, so they are found by content, not by index). */
function after(events: any[], last: any): any[] {
  if (!last) return events;
  for (let i = events.length - 1; i >= 0; i--)
    if (events[i]?.time === last.time && events[i]?.message === last.message) return events.slice(i + 1);
  return events;
}

export function eventRows(events: any[]) {
  return events.map((e) => [
    age(e?.time),
    paintStatus(out, String(e?.status ?? '-')),
    String(e?.message ?? ''),
  ]);
}

export function renderDescription(kd: KindInfo, o: any): string {
  const m = o?.metadata ?? {};
  const labels = Object.entries(m.labels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
  const status: string | undefined = o?.status;
  const reason = status && status !== 'DEPLOYED' ? reasonOf(o) : undefined;
  const note = kd.kind === 'Agent' || kd.kind === 'Function' ? trafficNote(o, kd.kind) : undefined;
  const parts = [
    fields([
      ['Name', m.name],
      ['Kind', kd.kind],
      ['Workspace', m.workspace],
      ['Status', status && paintStatus(out, status)],
      ['Reason', reason],
      ['State', typeof o?.state === 'string' ? o.state : undefined],
      ['Address', addressOf(o, kd.kind)],
      ['Traffic', note],
      ['Replicas', o?.replicas === undefined ? undefined : String(o.replicas)],
      ['Labels', labels],
      ['Created', m.createdAt && `${m.createdAt} (${age(m.createdAt)} ago)`],
      ['Updated', m.updatedAt && `${m.updatedAt} by ${m.updatedBy ?? '-'}`],
    ]),
    '',
  ].join('\n');
  const spec = o?.spec && Object.keys(o.spec).length ? `Spec:\n${indent(yaml().stringify(o.spec))}\n` : '';
  const events: any[] = Array.isArray(o?.events) ? o.events : [];
  const ev = kd.hasStatus
    ? `Events:\n${events.length ? indent(table([['AGE', 'STATUS', 'MESSAGE'], ...eventRows(events)])) : '  (none)'}\n`
    : '';
  return [parts, revisions(o), spec, ev].filter(Boolean).join('\n');
}

export function registerDescribe(program: Command) {
  const cmd = program
    .command('describe')
    .description('show one object with its status, the reason for it, its address and its events')
    .argument('<kind>', 'kind: plural, singular or alias')
    .argument('<name>', 'object name')
    .option(
      '-w, --watch',
      'then print each new event as it happens (until the object is removed or interrupted)',
    );
  addParentFlags(cmd).action(async (kindName: string, name: string, o: { watch?: boolean }) => {
    const kd = resolveKind(kindName);
    const cfg = loadCliConfig();
    const path = itemPath(collectionPath(kd, o), name);
    if (!o.watch) {
      out.write(renderDescription(kd, (await new Api(cfg).call('GET', path)).body));
      return;
    }
    let last: any;
    let shown = false;
    for await (const e of watch(cfg, path)) {
      if (e.type === 'SYNCED') continue;
      if (e.type === 'DELETED') {
        out.write(`${paint(out, 'dim', `${kd.kind.toLowerCase()}/${name} was removed`)}\n`);
        return;
      }
      const events: any[] = Array.isArray(e.object?.events) ? e.object.events : [];
      if (!shown) {
        out.write(renderDescription(kd, e.object));
        out.write(`${paint(out, 'dim', '-- new events as they happen --')}\n`);
        shown = true;
      } else for (const r of eventRows(after(events, last))) out.write(`  ${r.join('   ')}\n`);
      last = events.at(-1) ?? last;
    }
  });
}
