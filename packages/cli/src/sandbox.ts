// `berth sandbox ...`: create, list, get and delete sandboxes, and work inside one (exec, shell, cp, logs).
// `create` takes docker-run style flags (`--image`, `--memory`, `-e`, `--volume`, `--port`, `--ttl`) and answers once
// the sandbox runs; a sandbox that fails to start exits 1 with the reason its events give.
import { kindByName } from '@berth/sdk';
import type { Command } from 'commander';
import { Api, ApiFailure, itemPath, listAll, warningLines } from './client.js';
import { reasonOf } from './columns.js';
import { type CliConfig, loadCliConfig } from './config.js';
import { parseEnvs, parseMemory, parsePorts, parseVolumes } from './flags.js';
import { OUTPUT_HELP, parseFormat, render } from './output.js';
import { Progress } from './progress.js';
import { registerSandboxCp } from './sandbox-cp.js';
import { registerSandboxExec } from './sandbox-exec.js';
import { registerSandboxLogs } from './sandbox-logs.js';
import { registerSandboxShell } from './sandbox-shell.js';
import { registerSandboxSnapshots } from './snapshots.js';
import { outcomeLine, phaseOf, waitFor } from './wait.js';

const SANDBOX = kindByName('sandbox')!;
/** Past the server's own wait (30 s, then 504), how much longer `create` waits through the watch. */
const WAIT_MS = 10 * 60_000;

const show = (objects: any[], output: string | undefined, single: boolean) =>
  process.stdout.write(render(objects, parseFormat(output), SANDBOX, single));

interface CreateOptions {
  memory?: string;
  image?: string;
  ttl?: string;
  env?: string[];
  volume?: string[];
  port?: string[];
  output?: string;
}

/** Opens each `:public` port as a public preview named `port-<n>`; returns their addresses. */
async function publish(api: Api, name: string, ports: number[]): Promise<string[]> {
  const urls: string[] = [];
  for (const port of ports) {
    const { body } = await api.call('PUT', `/sandboxes/${encodeURIComponent(name)}/previews/port-${port}`, {
      body: { metadata: { name: `port-${port}` }, spec: { port, public: true } },
    });
    urls.push(body?.spec?.url ?? body?.metadata?.url ?? '');
  }
  return urls;
}

async function create(cfg: CliConfig, name: string, o: CreateOptions) {
  const format = parseFormat(o.output);
  const runtime: Record<string, unknown> = {};
  const memory = parseMemory(o.memory);
  if (memory !== undefined) runtime.memory = memory;
  if (o.image) runtime.image = o.image;
  if (o.ttl) runtime.ttl = o.ttl;
  if (o.env?.length) runtime.envs = parseEnvs(o.env);
  const ports = parsePorts(o.port);
  if (ports.length) runtime.ports = ports.map((p) => ({ target: p.port, protocol: 'HTTP' }));
  const volumes = parseVolumes(o.volume);
  const spec: Record<string, unknown> = { runtime };
  if (volumes.length) spec.volumes = volumes;
  const api = new Api(cfg);
  const progress = new Progress();
  progress.phase(
    o.image ? `starting on ${o.image} (pulled first if this server has not got it)` : 'starting',
  );
  let body: any;
  try {
    ({ body } = await api.call('POST', '/sandboxes', {
      body: { metadata: { name }, spec },
      query: { fieldValidation: 'Strict' },
    }));
  } catch (e) {
    // 504: the server's own wait ended first; the watch takes over.
    if (!(e instanceof ApiFailure && e.status === 504)) {
      progress.stop(true);
      throw e;
    }
    body = e.problem;
  }
  process.stderr.write(warningLines(`sandbox/${name}`, body));
  let outcome = { object: body, status: body?.status, failed: body?.status === 'FAILED' } as Awaited<
    ReturnType<typeof waitFor>
  >;
  if (body?.status !== 'DEPLOYED' && body?.status !== 'FAILED') {
    progress.phase(phaseOf('Sandbox', body?.status ?? 'DEPLOYING'));
    outcome = await waitFor(cfg, SANDBOX, '/sandboxes', name, progress, WAIT_MS);
  }
  if (outcome.failed || outcome.status !== 'DEPLOYED') {
    progress.stop(true);
    const { line } = outcomeLine(SANDBOX, { ...outcome, reason: outcome.reason ?? reasonOf(outcome.object) });
    process.stderr.write(`${line}\n`);
    process.exitCode = 1;
    return;
  }
  const previews = ports.some((p) => p.public) ? ports.filter((p) => p.public).map((p) => p.port) : [];
  const urls = previews.length ? await publish(api, name, previews) : [];
  progress.stop();
  show([outcome.object], o.output, true);
  if (format === 'table' || format === 'wide') {
    const url = outcome.object?.metadata?.url;
    for (const p of ports)
      if (!p.public) process.stderr.write(`port ${p.port}: ${url}/port/${p.port}/ (with an API key)\n`);
    previews.forEach((p, i) => {
      process.stderr.write(`port ${p}: ${urls[i]} (public preview port-${p})\n`);
    });
  }
}

export function registerSandbox(program: Command) {
  const sandbox = program
    .command('sandbox')
    .alias('sbx')
    .description('create sandboxes and work inside them');

  sandbox
    .command('create')
    .description('create a sandbox and wait until it runs (exit 1 with the reason when it cannot)')
    .argument('<name>', 'sandbox name (lowercase letters, digits, -)')
    .option('--memory <mb>', 'memory limit in MB (default 4096)')
    .option('--image <image>', 'root image (default: the host userland)')
    .option('--ttl <duration>', 'delete automatically after this long, e.g. 30m, 24h')
    .option('-e, --env <KEY=VALUE...>', 'environment variables of the sandbox')
    .option(
      '--volume <volume...>',
      'name:/path or name:/path:ro: mount a volume of the workspace (made with berth volume create)',
    )
    .option(
      '--port <port...>',
      '3000 or 3000:public: a port the sandbox serves; :public also opens a public preview of it',
    )
    .option('-o, --output <format>', OUTPUT_HELP)
    .action((name: string, o: CreateOptions) => create(loadCliConfig(), name, o));

  sandbox
    .command('list')
    .alias('ls')
    .description('list sandboxes')
    .option('-o, --output <format>', OUTPUT_HELP)
    .action(async (o: { output?: string }) => {
      const items = await listAll(new Api(loadCliConfig()), '/sandboxes');
      const format = parseFormat(o.output);
      if (!items.length && (format === 'table' || format === 'wide'))
        process.stderr.write('no sandboxes found\n');
      else show(items, o.output, false);
    });

  sandbox
    .command('get')
    .description('show one sandbox (berth describe sandbox <name> adds its events)')
    .argument('<name>', 'sandbox name')
    .option('-o, --output <format>', OUTPUT_HELP)
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
  registerSandboxSnapshots(sandbox);
}
