// `berth sandbox ...`: create, list, get and delete sandboxes, and work inside one (exec, shell, cp, logs).
import type { Command } from 'commander';
import { Api, itemPath, warningLines } from './client.js';
import { loadCliConfig } from './config.js';
import { age, parseFormat, render, table } from './output.js';
import { registerSandboxCp } from './sandbox-cp.js';
import { registerSandboxExec } from './sandbox-exec.js';
import { registerSandboxLogs } from './sandbox-logs.js';
import { registerSandboxShell } from './sandbox-shell.js';

function rows(objects: any[]): string {
  const out = [['NAME', 'STATUS', 'STATE', 'MEMORY', 'AGE', 'URL']];
  for (const o of objects)
    out.push([
      String(o?.metadata?.name ?? '-'),
      String(o?.status ?? '-'),
      String(o?.state ?? '-'),
      o?.spec?.runtime?.memory ? `${o.spec.runtime.memory}MB` : '-',
      age(o?.metadata?.createdAt),
      String(o?.metadata?.url ?? '-'),
    ]);
  return `${table(out)}\n`;
}

const show = (objects: any[], output: string | undefined, single: boolean) => {
  const format = parseFormat(output);
  process.stdout.write(format === 'table' ? rows(objects) : render(objects, format, 'Sandbox', single));
};

function parseEnvs(list: string[] = []) {
  return list.map((kv) => {
    const i = kv.indexOf('=');
    if (i <= 0) throw new Error(`--env takes KEY=VALUE, got ${JSON.stringify(kv)}`);
    return { name: kv.slice(0, i), value: kv.slice(i + 1) };
  });
}

export function registerSandbox(program: Command) {
  const sandbox = program
    .command('sandbox')
    .alias('sbx')
    .description('create sandboxes and work inside them');

  sandbox
    .command('create')
    .description('create a sandbox and wait until it runs')
    .argument('<name>', 'sandbox name (lowercase letters, digits, -)')
    .option('--memory <mb>', 'memory limit in MB (default 4096)')
    .option('--image <image>', 'root image (default: the host userland)')
    .option('--ttl <duration>', 'delete automatically after this long, e.g. 30m, 24h')
    .option('-e, --env <KEY=VALUE...>', 'environment variables of the sandbox')
    .option('-o, --output <format>', 'json or yaml (default: a table)')
    .action(
      async (
        name: string,
        o: { memory?: string; image?: string; ttl?: string; env?: string[]; output?: string },
      ) => {
        const runtime: Record<string, unknown> = {};
        if (o.memory !== undefined) {
          const mb = Number(o.memory);
          if (!Number.isInteger(mb) || mb <= 0)
            throw new Error(`--memory takes a whole number of MB, got ${o.memory}`);
          runtime.memory = mb;
        }
        if (o.image) runtime.image = o.image;
        if (o.ttl) runtime.ttl = o.ttl;
        if (o.env?.length) runtime.envs = parseEnvs(o.env);
        const { body } = await new Api(loadCliConfig()).call('POST', '/sandboxes', {
          body: { metadata: { name }, spec: { runtime } },
        });
        process.stderr.write(warningLines(`sandbox/${name}`, body));
        show([body], o.output, true);
      },
    );

  sandbox
    .command('list')
    .alias('ls')
    .description('list sandboxes')
    .option('-o, --output <format>', 'json or yaml (default: a table)')
    .action(async (o: { output?: string }) => {
      const api = new Api(loadCliConfig());
      const items: unknown[] = [];
      let cursor: string | null = null;
      do {
        const { body, headers } = await api.call('GET', '/sandboxes', {
          query: { limit: '500', ...(cursor ? { cursor } : {}) },
        });
        items.push(...(Array.isArray(body) ? body : []));
        cursor = headers.get('x-next-cursor');
      } while (cursor);
      if (!items.length && parseFormat(o.output) === 'table') process.stderr.write('no sandboxes found\n');
      else show(items, o.output, false);
    });

  sandbox
    .command('get')
    .description('show one sandbox')
    .argument('<name>', 'sandbox name')
    .option('-o, --output <format>', 'json or yaml (default: a table)')
    .action(async (name: string, o: { output?: string }) => {
      const { body } = await new Api(loadCliConfig()).call('GET', itemPath('/sandboxes', name));
      show([body], o.output, true);
    });

  sandbox
    .command('delete')
    .alias('rm')
    .description('delete a sandbox: its processes stop and its files are released')
    .argument('<name>', 'sandbox name')
    .action(async (name: string) => {
      const { body } = await new Api(loadCliConfig()).call('DELETE', itemPath('/sandboxes', name));
      process.stdout.write(`sandbox/${name} deleted (${body?.status ?? 'DELETING'})\n`);
    });

  registerSandboxExec(sandbox);
  registerSandboxShell(sandbox);
  registerSandboxLogs(sandbox);
  registerSandboxCp(sandbox);
}
