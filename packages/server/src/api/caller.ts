// GET /v0/caller: who the credential is and its role in the workspace the request acts in, so a client (the
// console) shows only what that role may do. It tells nothing the caller could not learn by trying.
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';

export function registerCaller(app: FastifyInstance) {
  app.get('/caller', async (req) => {
    const a = requireRole(req, 'viewer');
    return {
      subject: a.principal.subject,
      subjectType: a.principal.subType,
      homeWorkspace: a.principal.homeWorkspace,
      workspace: a.workspace,
      role: a.role,
    };
  });
}
