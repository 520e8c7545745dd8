// `berth get nodes`: the servers of the cluster (GET /v0/nodes, for admins of workspace `default`): each node's
// region, capacity, load, the roles it leads and whether its lease holds. `berth node drain|undrain <node>`.
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
  self: boolean;
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
  ])
    node
      .command(`${verb} <node>`)
      .description(`${verb} a node: it ${what}`)
      .action(async (id: string) => {
        const { body } = await new Api(loadCliConfig()).call(
          'POST',
          `/nodes/${encodeURIComponent(id)}/${verb}`,
        );
        process.stdout.write(`node ${(body as NodeView).id} ${verb}ed\n`);
      });
}
