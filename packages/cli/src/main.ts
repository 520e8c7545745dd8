// The `berth` command line: one subcommand per module, composed here.
import { Command } from 'commander';
import { loadCliConfig } from './config.js';

type Registrar = (program: Command) => void;

/**
 * The modules that declare each top-level command. Only the module of the command typed is loaded (help, completion
 * and an unknown command load them all): a short command then starts without compiling the others.
 */
const MODULES: Record<string, () => Promise<Registrar>[]> = {
  serve: () => [import('./serve.js').then((m) => m.registerServe)],
  login: () => [import('./login.js').then((m) => m.registerLogin)],
  get: () => [import('./get.js').then((m) => m.registerGet)],
  describe: () => [import('./describe.js').then((m) => m.registerDescribe)],
  apply: () => [import('./apply.js').then((m) => m.registerApply)],
  delete: () => [import('./delete.js').then((m) => m.registerDelete)],
  deploy: () => [import('./deploy.js').then((m) => m.registerDeploy)],
  sandbox: () => [import('./sandbox.js').then((m) => m.registerSandbox)],
  volume: () => [import('./volume.js').then((m) => m.registerVolume)],
  image: () => [import('./image.js').then((m) => m.registerImage)],
  run: () => [
    import('./run-model.js').then((m) => m.registerRunModel),
    import('./jobs.js').then((m) => m.registerJobs),
    import('./workloads.js').then((m) => m.registerWorkloads),
  ],
  usage: () => [import('./usage.js').then((m) => m.registerUsage)],
  status: () => [import('./status.js').then((m) => m.registerStatus)],
  debug: () => [import('./debug.js').then((m) => m.registerDebug)],
  node: () => [import('./nodes.js').then((m) => m.registerNode)],
  host: () => [import('./host.js').then((m) => m.registerHost)],
  completion: () => [import('./completion.js').then((m) => m.registerCompletion)],
};
/** Other names of a command, and commands declared by another command's module. */
const SAME_MODULE: Record<string, string> = {
  sbx: 'sandbox',
  vol: 'volume',
  'volume-template': 'volume',
  logs: 'run',
  cancel: 'run',
  promote: 'run',
  rollback: 'run',
};

/** The registrars for `argv`: the typed command's own, or every one (help, completion, a typo). */
async function registrars(command: string | undefined): Promise<Registrar[]> {
  const name = command && (SAME_MODULE[command] ?? command);
  const wanted = name && name !== 'completion' && MODULES[name] ? [MODULES[name]] : Object.values(MODULES);
  return Promise.all(wanted.flatMap((load) => load()));
}

/**
 * `berth --version`: the CLI's version, then the server's when one is configured (kubectl-style). An unreachable
 * server is said on stderr; the CLI's own version is still the answer, so the exit status is 0.
 */
async function printVersions() {
  const { CLI_VERSION, serverHealth } = await import('./server-info.js');
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

/**
 * A reader that stops early (`berth logs … | head`) closes the pipe: the CLI then stops quietly, with status 0, as a
 * reader that has what it wanted expects — never a stack trace of the write that failed.
 */
function quietOnClosedPipe() {
  for (const out of [process.stdout, process.stderr])
    out.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') process.exit(0);
      throw e;
    });
}

export async function main(argv: string[]) {
  quietOnClosedPipe();
  const program = new Command('berth').description(
    'Berth: self-hosted sandboxes, agents, MCP servers and model gateway',
  );
  program.showHelpAfterError();
  // Declared for --help; answered here because commander's own handler prints a fixed string and exits.
  program.option('-V, --version', 'print the CLI version and, when logged in, the server version');
  if (argv[2] === '--version' || argv[2] === '-V') return printVersions();
  for (const register of await registrars(argv[2])) register(program);
  await program.parseAsync(argv);
}
