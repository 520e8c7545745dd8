// The `berth` command line: one subcommand per module, composed here.
import { Command } from 'commander';
import { registerServe } from './serve.js';

export async function main(argv: string[]) {
  const program = new Command('berth').description('Berth: self-hosted sandboxes, agents, MCP servers and model gateway');
  program.showHelpAfterError();
  registerServe(program);
  await program.parseAsync(argv);
}
