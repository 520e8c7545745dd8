// Authentication and identity: API keys, service accounts, JWTs, workspaces and roles. createAuth wires the
// authenticator and the signing key; the routes over them are in api/identity.ts, mounted by main.ts, which
// calls bootstrap() once the server listens.
import type { Logger } from 'pino';
import type { Store } from '../store/store.js';
import { createAuthenticator } from './authenticator.js';
import { bootstrap } from './bootstrap.js';
import type { SecretBox } from '../crypto/secret-box.js';
import { loadSharedSigningKey, loadSigningKey } from './signing-key.js';

export interface AuthDeps {
  store: Store;
  dataDir: string;
  logger: Logger;
  /** Several servers share the store (a cluster): the signing key is kept there, sealed with this box. */
  shared?: SecretBox;
}

export async function createAuth(deps: AuthDeps) {
  const signingKey = deps.shared
    ? await loadSharedSigningKey(deps.store, deps.shared, deps.dataDir)
    : await loadSigningKey(deps.dataDir);
  // The issuer is the server's public address, known only once it listens; until then nothing verifies.
  let issuer: () => string = () => {
    throw new Error('the issuer is not known until the server listens');
  };
  const authenticator = createAuthenticator({ store: deps.store, signingKey, issuer: () => issuer() });
  const context: AuthContext = {
    store: deps.store,
    authenticator,
    signingKey,
    logger: deps.logger,
    issuer: () => issuer(),
  };
  return {
    authenticator,
    context,
    /** The server's public address, the issuer of the JWTs it signs: known once it listens. */
    setIssuer(baseUrl: () => string) {
      issuer = baseUrl;
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
