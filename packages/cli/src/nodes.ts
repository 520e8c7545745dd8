// `berth get nodes`: the servers of the cluster (GET /v0/nodes, for admins of workspace `default`): each node's
// region, capacity, load, the roles it leads and whether its lease holds.
import { Api } from './client.js';
import { loadCliConfig } from './config.js';
import { type Format, renderData, table } from './output.js';

interface NodeView {
  id: string;
  address: string;
  region: string;
  cores: number;
  memoryMb: number;
  instances: number;
  leads: string[];
  heartbeatAt: string;
  healthy: boolean;
  stopped: boolean;
  self: boolean;
}

const health = (n: NodeView) => (n.stopped ? 'Stopped' : n.healthy ? 'Ready' : 'Unhealthy');

export async function getNodes(format: Format = 'table') {
  const { body } = await new Api(loadCliConfig()).call('GET', '/nodes');
  if (format === 'json' || format === 'yaml') return void process.stdout.write(renderData(body, format));
  const rows = [['NAME', 'STATUS', 'REGION', 'CORES', 'MEMORY', 'INSTANCES', 'LEADS', 'ADDRESS']];
  for (const n of body as NodeView[])
    rows.push([
      n.self ? `${n.id} (this)` : n.id,
      health(n),
      n.region,
      String(n.cores),
      `${n.memoryMb} MB`,
      String(n.instances),
      n.leads.join(',') || '-',
      n.address,
    ]);
  process.stdout.write(`${table(rows)}\n`);
}
