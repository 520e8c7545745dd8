// Authentication and identity: API keys, service accounts, the OAuth2 token endpoint, workspaces and roles.
// createAuth wires them; main.ts mounts the routes and calls bootstrap() once the server listens.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { registerOAuthPublic, registerOAuthV0 } from '../api/oauth.js';
import { registerServiceAccounts } from '../api/service-accounts.js';
import { registerWorkspaces } from '../api/workspaces.js';
import type { Store } from '../store/store.js';
import { createAuthenticator } from './authenticator.js';
import { bootstrap } from './bootstrap.js';
import type { SecretBox } from './secret-box.js';
import { loadSigningKey } from './signing-key.js';

export interface AuthDeps {
  store: Store;
  dataDir: string;
  box: SecretBox;
  logger: Logger;
}

export interface RouteOptions {
  baseUrl: () => string;
}

export async function createAuth(deps: AuthDeps) {
  const signingKey = await loadSigningKey(deps.dataDir);
  // The issuer is the server's public address, known only once it listens; until then nothing verifies.
  let issuer: () => string = () => {
    throw new Error('auth routes are not registered yet');
  };
  const authenticator = createAuthenticator({ store: deps.store, signingKey, issuer: () => issuer() });
  const ctx = { store: deps.store, authenticator, signingKey, logger: deps.logger, issuer: () => issuer() };
  return {
    authenticator,
    registerRoutes(v0: FastifyInstance, o: RouteOptions) {
      issuer = o.baseUrl;
      registerWorkspaces(v0, ctx);
      registerServiceAccounts(v0, ctx);
      registerOAuthV0(v0, ctx);
    },
    registerPublicRoutes(app: FastifyInstance, o: RouteOptions) {
      issuer = o.baseUrl;
      registerOAuthPublic(app, ctx);
    },
    bootstrap: () => bootstrap({ store: deps.store, dataDir: deps.dataDir, logger: deps.logger }),
  };
}

export type AuthContext = {
  store: Store;
  authenticator: ReturnType<typeof createAuthenticator>;
  signingKey: Awaited<ReturnType<typeof loadSigningKey>>;
  logger: Logger;
  issuer: () => string;
};
