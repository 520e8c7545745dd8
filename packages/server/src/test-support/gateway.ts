// The gateway alone, as the gateway's own tests run it: a real SQLite store in a temporary directory, real auth with
// its admin key, resources over the store, and `startGateway` on a plain HTTP server on loopback (no Fastify, no
// controllers). In two steps, because tests put things in the store or start a runtime between them.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import { createAuth } from '../auth/index.js';
import { SecretBox } from '../crypto/secret-box.js';
import { type Gateway, type GatewayDeps, startGateway } from '../gateway/index.js';
import { KINDS } from '../kinds/index.js';
import { Resources } from '../store/resources.js';
import { SqliteStore } from '../store/sqlite.js';

type Auth = Awaited<ReturnType<typeof createAuth>>;

export interface GatewayParts {
  dir: string;
  logger: Logger;
  store: SqliteStore;
  auth: Auth;
  adminKey: string;
  resources: Resources;
  /** Starts the gateway over these parts with `deps` (a driver at least), listening on a free loopback port. */
  serve(deps: Pick<GatewayDeps, 'driver'> & Partial<GatewayDeps>): Promise<ServedGateway>;
  /** Closes the store and removes the directory (after the gateway's own close, when one was served). */
  close(): Promise<void>;
}

export interface ServedGateway {
  gateway: Gateway;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** Closes the gateway and its HTTP server. */
  close(): Promise<void>;
}

/** The store, auth and resources a gateway stands on; `store` makes the store (a subclass, say) at the path given. */
export async function gatewayParts(
  opts: { prefix?: string; store?: (path: string) => SqliteStore } = {},
): Promise<GatewayParts> {
  const dir = mkdtempSync(join(tmpdir(), opts.prefix ?? 'berth-gw-'));
  const logger = pino({ level: 'silent' });
  const path = join(dir, 'berth.db');
  const store = opts.store ? opts.store(path) : new SqliteStore(path);
  const auth = await createAuth({ store, dataDir: dir, logger });
  const { adminKey } = await auth.bootstrap();
  if (!adminKey) throw new Error('a new store gives an admin key');
  const resources = new Resources(store, KINDS, new SecretBox(randomBytes(32)), { regions: ['local'] });
  return {
    dir,
    logger,
    store,
    auth,
    adminKey,
    resources,
    async serve(deps) {
      const server = createServer((_req, res) => res.writeHead(404).end());
      const gateway = await startGateway({
        server,
        resources,
        authenticator: auth.authenticator,
        logger,
        standbyAfterS: 3600,
        ...deps,
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return {
        gateway,
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        async close() {
          await gateway.close();
          await new Promise((r) => server.close(r));
        },
      };
    },
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
