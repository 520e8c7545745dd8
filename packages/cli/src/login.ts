// `berth login`: checks the server address and credential against the server (`GET /v0/quotas` answers only a key
// that may read the workspace it acts in), then records them for later commands. A key the server refuses is not
// saved; `--no-verify` saves without asking (a server not up yet).
import type { Command } from 'commander';
import { Api, ApiFailure } from './client.js';
import { saveCliConfig } from './config.js';

interface LoginOptions {
  url: string;
  key: string;
  workspace?: string;
  verify: boolean;
}

export function registerLogin(program: Command) {
  program
    .command('login')
    .description('check the server URL and API key, then save them to the config file (mode 0600)')
    .requiredOption('--url <url>', 'server address, e.g. http://127.0.0.1:8080')
    .requiredOption('--key <key>', 'API key (or a JWT)')
    .option('--workspace <workspace>', 'workspace to act in (default: the key home workspace)')
    .option('--no-verify', 'save without asking the server')
    .action(async (o: LoginOptions) => {
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
      const cfg = {
        url: o.url.replace(/\/+$/, ''),
        apiKey: o.key,
        ...(o.workspace ? { workspace: o.workspace } : {}),
      };
      let workspace = o.workspace;
      if (o.verify) {
        try {
          workspace = (await new Api(cfg).call('GET', '/quotas')).body?.workspace ?? workspace;
        } catch (e) {
          const why =
            e instanceof ApiFailure && e.status === 401
              ? 'the server refused this key'
              : e instanceof ApiFailure && (e.status === 403 || e.status === 404)
                ? `this key cannot act in workspace ${JSON.stringify(o.workspace ?? '')}`
                : undefined;
          throw new Error(
            `not saved: ${why ? `${why} (${(e as Error).message})` : (e as Error).message}${why ? '' : '; --no-verify saves it anyway'}`,
          );
        }
      }
      const path = saveCliConfig(cfg);
      process.stdout.write(
        `${o.verify ? 'logged in to' : 'saved (not checked)'} ${url.origin}${workspace ? ` (workspace ${workspace})` : ''}: ${path}\n`,
      );
    });
}
