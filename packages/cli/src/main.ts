// The `berth` command line: one subcommand per module, composed here.
import { Command } from 'commander';
import { registerApply } from './apply.js';
import { registerDelete } from './delete.js';
import { registerGet } from './get.js';
import { registerLogin } from './login.js';
import { registerRunModel } from './run-model.js';
import { registerSandbox } from './sandbox.js';
import { registerServe } from './serve.js';
import { registerUsage } from './usage.js';

export async function main(argv: string[]) {
  const program = new Command('berth').description(
    'Berth: self-hosted sandboxes, agents, MCP servers and model gateway',
  );
  program.showHelpAfterError();
  registerServe(program);
  registerLogin(program);
  registerGet(program);
  registerApply(program);
  registerDelete(program);
  registerSandbox(program);
  registerRunModel(program);
  registerUsage(program);
  await program.parseAsync(argv);
}
