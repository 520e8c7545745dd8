// The identity routes over auth/: workspaces, members and invitations (and the service's `/users` over them),
// service accounts and API keys, the OAuth2 token endpoint (under /v0 and at the root, where OAuth clients look).
import type { FastifyInstance } from 'fastify';
import type { AuthContext } from '../auth/index.js';
import { registerInvitations } from './invitations.js';
import { registerOAuthPublic, registerOAuthV0 } from './oauth.js';
import { registerServiceAccounts } from './service-accounts.js';
import { registerWorkspaceUsers } from './workspace-users.js';
import { registerWorkspaces, type WorkspaceHooks } from './workspaces.js';

export function registerIdentityRoutes(v0: FastifyInstance, ctx: AuthContext, hooks: WorkspaceHooks = {}) {
  registerWorkspaces(v0, ctx, hooks);
  registerInvitations(v0, ctx);
  registerWorkspaceUsers(v0, ctx);
  registerServiceAccounts(v0, ctx);
  registerOAuthV0(v0, ctx);
}

export function registerIdentityPublicRoutes(app: FastifyInstance, ctx: AuthContext) {
  registerOAuthPublic(app, ctx);
}
