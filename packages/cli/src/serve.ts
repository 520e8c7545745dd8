// `berth serve`: runs the server in this process until SIGTERM/SIGINT.
import type { Command } from 'commander';
import { exitOnLostErrors } from './lost-errors.js';

type ServeFlags = Partial<Record<'port' | 'host' | 'dataDir' | 'database' | 'standbyAfter', string>>;

export function registerServe(program: Command) {
  program
    .command('serve')
    .description('run the Berth server (management API, gateway, controllers)')
    .option('--port <port>', 'port to listen on (0 = pick a free one); env BERTH_PORT')
    .option('--host <host>', 'address to listen on (default 127.0.0.1)')
    .option('--data-dir <dir>', 'data directory (default ~/.berth); env BERTH_DATA_DIR')
    .option(
      '--database <url>',
      'a PostgreSQL URL shared by every server of a cluster (default: SQLite in the data dir); env BERTH_DATABASE_URL',
    )
    .option(
      '--standby-after <seconds>',
      'idle seconds before a sandbox goes to standby; env BERTH_STANDBY_AFTER',
    )
    .action(async (o: ServeFlags) => {
      // Loaded here, not at the top: the server pulls in Fastify and SQLite, which other commands never need.
      const { loadConfig, SERVER_UMASK, startServer } = await import('@berth/server');
      process.umask(SERVER_UMASK);
      const config = loadConfig(o, process.env);
      const server = await startServer(config);
      exitOnLostErrors(server.logger);
      if (server.adminKey) {
        process.stdout.write(
          `admin API key (shown once, also in ${config.dataDir}/admin.key): ${server.adminKey}\n`,
        );
      }
      process.stdout.write(`berth listening on ${server.url}\n`);
      let closing = false;
      const stop = async () => {
        if (closing) return;
        closing = true;
        await server.close();
        process.exit(0);
      };
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    });
}
