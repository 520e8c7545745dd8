// `berth login`: records the server address and credential for later commands.
import type { Command } from 'commander';
import { saveCliConfig } from './config.js';

export function registerLogin(program: Command) {
  program
    .command('login')
    .description('save the server URL and API key to the config file (mode 0600)')
    .requiredOption('--url <url>', 'server address, e.g. http://127.0.0.1:8080')
    .requiredOption('--key <key>', 'API key (or a JWT)')
    .option('--workspace <workspace>', 'workspace to act in (default: the key home workspace)')
    .action((o: { url: string; key: string; workspace?: string }) => {
      let url: URL;
      try {
        url = new URL(o.url);
      } catch {
        throw new Error(
          `--url must be an absolute URL such as http://127.0.0.1:8080, got ${JSON.stringify(o.url)}`,
        );
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        throw new Error('--url must be http or https');
      const path = saveCliConfig({
        url: o.url.replace(/\/+$/, ''),
        apiKey: o.key,
        ...(o.workspace ? { workspace: o.workspace } : {}),
      });
      process.stdout.write(
        `saved ${url.origin}${o.workspace ? ` (workspace ${o.workspace})` : ''} to ${path}\n`,
      );
    });
}
