// PLACEHOLDER until the auth module lands: accepts nothing.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ApiError } from '../api/errors.js';
import type { Store } from '../store/store.js';
import type { Authenticator } from './access.js';
import type { SecretBox } from './secret-box.js';

export interface AuthDeps {
  store: Store;
  dataDir: string;
  box: SecretBox;
  logger: Logger;
}

export async function createAuth(_deps: AuthDeps) {
  const authenticator: Authenticator = {
    async resolve() {
      throw new ApiError('UNAUTHENTICATED', 'not implemented');
    },
    async principal() {
      throw new ApiError('UNAUTHENTICATED', 'not implemented');
    },
  };
  return {
    authenticator,
    registerRoutes(_v0: FastifyInstance, _o: { baseUrl: () => string }) {},
    registerPublicRoutes(_app: FastifyInstance, _o: { baseUrl: () => string }) {},
    async bootstrap(): Promise<{ adminKey?: string }> {
      return {};
    },
  };
}
