// `berth delete <kind> <name>`: asks the server to delete; kinds with a status finish asynchronously.
import type { Command } from 'commander';
import { Api, addParentFlags, collectionPath, itemPath, resolveKind } from './client.js';
import { loadCliConfig } from './config.js';

export function registerDelete(program: Command) {
  const cmd = program
    .command('delete')
    .description('delete an object (e.g. `berth delete policy p1`)')
    .argument('<kind>', 'kind: plural, singular or alias')
    .argument('<name>', 'object name');
  addParentFlags(cmd).action(async (kindName: string, name: string, o: Record<string, unknown>) => {
    const kd = resolveKind(kindName);
    const api = new Api(loadCliConfig());
    const { body } = await api.call('DELETE', itemPath(collectionPath(kd, o), name));
    const state = typeof body?.status === 'string' && body.status !== 'TERMINATED' ? ` (${body.status})` : '';
    process.stdout.write(`${kd.kind.toLowerCase()}/${name} deleted${state}\n`);
  });
}
