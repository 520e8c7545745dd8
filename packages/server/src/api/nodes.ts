// GET /v0/nodes: the servers of the cluster (cluster/nodes.ts), for the operator: an admin of the workspace the first
// start created (`default`). A tenant's admin is refused: the list describes every tenant's load.
import type { FastifyInstance } from 'fastify';
import { DEFAULT_WORKSPACE } from '../auth/bootstrap.js';
import { requireRole } from '../auth/require-role.js';
import type { Nodes } from '../cluster/nodes.js';
import { ApiError } from '../errors.js';

export function registerNodes(app: FastifyInstance, deps: { nodes: () => Nodes | undefined }) {
  app.get('/nodes', async (req) => {
    const a = requireRole(req, 'admin');
    if (a.workspace !== DEFAULT_WORKSPACE)
      throw new ApiError(
        'FORBIDDEN',
        `the cluster's nodes are shown to the admins of workspace ${DEFAULT_WORKSPACE} only (the operator's)`,
      );
    const nodes = deps.nodes();
    if (!nodes) throw new ApiError('UNAVAILABLE', 'the server is starting; ask again');
    return (await nodes.list()).map((n) => ({ ...n, self: n.id === nodes.self.id }));
  });
}
