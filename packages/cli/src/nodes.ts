// `berth get nodes`: the servers of the cluster (GET /v0/nodes, for admins of workspace `default`): each node's
// region, capacity, load, the roles it leads and whether its lease holds. `berth node drain|undrain <node>`;
// `drain --wait` reads the node until it holds nothing (its `empty`), or fails at `--timeout` saying what it holds.
import type { Command } from 'commander';
import { Api } from './client.js';
import { loadCliConfig } from './config.js';
import { type Format, renderData, table } from './output.js';

interface NodeView {
  id: string;
  address: string;
  region: string;
  /** Every region it serves (servers before decision 077 did not say). */
  regions?: string[];
  cores: number;
  memoryMb: number;
  instances: number;
  leads: string[];
  heartbeatAt: string;
  healthy: boolean;
  stopped: boolean;
  drained?: boolean;
  /** What it still holds (servers before decision 082 did not say). */
  holds?: { sandboxes: number; instances: number; leads: string[] };
  empty?: boolean;
  self: boolean;
}

/** How long `drain --wait` waits by default (seconds): a drained leader exits, and its lease may lapse first. */
export const DRAIN_TIMEOUT_S = 300;
const POLL_MS = 1000;

const holding = (n: NodeView) => {
  const h = n.holds;
  if (!h) return 'unknown (the server does not report what a node holds)';
  const parts = [];
  if (h.sandboxes) parts.push(`${h.sandboxes} sandbox(es) placed on it`);
  if (h.instances) parts.push(`${h.instances} instance(s) running (replicas, tasks, builds, sandboxes)`);
  if (h.leads.length) parts.push(`the lead of ${h.leads.join(', ')}`);
  return parts.join('; ') || 'nothing';
};

/** Reads the node until it holds nothing; false (having said what it still holds) after `timeoutS`. */
export async function waitDrained(api: Api, id: string, timeoutS: number): Promise<boolean> {
  const until = Date.now() + timeoutS * 1000;
  let last = '';
  let lastError = '';
  for (;;) {
    try {
      const { body } = await api.call('GET', '/nodes');
      const n = (body as NodeView[]).find((x) => x.id === id);
      if (!n) throw new Error(`node ${id} is no longer listed`);
      if (n.empty) return true;
      const line = holding(n);
      if (line !== last) process.stdout.write(`node ${id} still holds ${line}\n`);
      last = line;
      lastError = '';
    } catch (err) {
      // The server answering may be the drained leader, which exits: the next read goes to another one.
      lastError = (err as Error).message;
    }
    if (Date.now() >= until) {
      process.stderr.write(
        `node ${id} still holds ${last || 'unknown'} after ${timeoutS} s${lastError ? ` (last read failed: ${lastError})` : ''}\n`,
      );
      return false;
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

const health = (n: NodeView) =>
  (n.stopped ? 'Stopped' : n.healthy ? 'Ready' : 'Unhealthy') + (n.drained ? ',Drained' : '');

export async function getNodes(format: Format = 'table') {
  const { body } = await new Api(loadCliConfig()).call('GET', '/nodes');
  if (format === 'json' || format === 'yaml') return void process.stdout.write(renderData(body, format));
  const rows = [['NAME', 'STATUS', 'REGION', 'CORES', 'MEMORY', 'INSTANCES', 'LEADS', 'ADDRESS']];
  for (const n of body as NodeView[])
    rows.push([
      n.self ? `${n.id} (this)` : n.id,
      health(n),
      (n.regions ?? [n.region]).join(','),
      String(n.cores),
      `${n.memoryMb} MB`,
      String(n.instances),
      n.leads.join(',') || '-',
      n.address,
    ]);
  process.stdout.write(`${table(rows)}\n`);
}

export function registerNode(program: Command) {
  const node = program
    .command('node')
    .description("operate the cluster's servers (admins of workspace default)");
  for (const [verb, what] of [
    [
      'drain',
      'gives up the roles it leads (what it held is started again, fresh, elsewhere) and leads none until undrained',
    ],
    ['undrain', 'may lead again'],
  ]) {
    const c = node.command(`${verb} <node>`).description(`${verb} a node: it ${what}`);
    if (verb === 'drain')
      c.option(
        '--wait',
        'return once the node holds nothing: no sandbox placed on it, no instance running, no role led',
      ).option('--timeout <seconds>', 'with --wait: fail after this long', String(DRAIN_TIMEOUT_S));
    c.action(async (id: string, o: { wait?: boolean; timeout?: string }) => {
      const api = new Api(loadCliConfig());
      const { body } = await api.call('POST', `/nodes/${encodeURIComponent(id)}/${verb}`);
      process.stdout.write(`node ${(body as NodeView).id} ${verb}ed\n`);
      if (!o.wait) return;
      const timeoutS = Number(o.timeout);
      if (!Number.isFinite(timeoutS) || timeoutS <= 0)
        throw new Error(`--timeout: expected a number of seconds, got ${JSON.stringify(o.timeout)}`);
      if (await waitDrained(api, (body as NodeView).id, timeoutS))
        process.stdout.write(`node ${(body as NodeView).id} holds nothing\n`);
      else process.exitCode = 1;
    });
  }
}
