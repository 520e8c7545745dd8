// The `berth` command line: one subcommand per module, composed here.
import { Command } from 'commander';
import { registerApply } from './apply.js';
import { registerCompletion } from './completion.js';
import { registerDebug } from './debug.js';
import { registerDelete } from './delete.js';
import { registerDeploy } from './deploy.js';
import { registerGet } from './get.js';
import { registerImage } from './image.js';
import { registerJobs } from './jobs.js';
import { registerLogin } from './login.js';
import { registerRunModel } from './run-model.js';
import { registerSandbox } from './sandbox.js';
import { registerServe } from './serve.js';
import { CLI_VERSION, serverHealth } from './server-info.js';
import { loadCliConfig } from './config.js';
import { registerStatus } from './status.js';
import { registerUsage } from './usage.js';
import { registerVolume } from './volume.js';
import { registerWorkloads } from './workloads.js';

/**
 * `berth --version`: the CLI's version, then the server's when one is configured (kubectl-style). An unreachable
 * server is said on stderr; the CLI's own version is still the answer, so the exit status is 0.
 */
async function printVersions() {
  process.stdout.write(`berth CLI ${CLI_VERSION}\n`);
  let cfg: ReturnType<typeof loadCliConfig>;
  try {
    cfg = loadCliConfig();
  } catch {
    return;
  }
  try {
    const h = await serverHealth(cfg);
    process.stdout.write(`server ${h.version} at ${h.url}\n`);
  } catch (e) {
    process.stderr.write(`server: ${(e as Error).message}\n`);
  }
}

export async function main(argv: string[]) {
  const program = new Command('berth').description(
    'Berth: self-hosted sandboxes, agents, MCP servers and model gateway',
  );
  program.showHelpAfterError();
  // Declared for --help; answered here because commander's own handler prints a fixed string and exits.
  program.option('-V, --version', 'print the CLI version and, when logged in, the server version');
  if (argv[2] === '--version' || argv[2] === '-V') return printVersions();
  registerServe(program);
  registerLogin(program);
  registerGet(program);
  registerApply(program);
  registerDelete(program);
  registerDeploy(program);
  registerSandbox(program);
  registerVolume(program);
  registerImage(program);
  registerRunModel(program);
  registerJobs(program);
  registerWorkloads(program);
  registerUsage(program);
  registerStatus(program);
  registerDebug(program);
  registerCompletion(program);
  await program.parseAsync(argv);
}
