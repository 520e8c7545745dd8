// GET /v0/nodes: the servers of the cluster (cluster/nodes.ts), for the operator: an admin of the workspace the first
// start created (`default`). A tenant's admin is refused: the list describes every tenant's load. POST
// /v0/nodes/{id}/drain|undrain, for the same operator: a drained node gives up leading and is not chosen to lead
// again until undrained (docs/cluster.md). Each node read says what it still holds (`holds`, `empty`), which
// `berth node drain --wait` polls until the drained node holds nothing.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DEFAULT_WORKSPACE } from '../auth/bootstrap.js';
import { requireRole } from '../auth/require-role.js';
import { AloneError, holdingsOf, type NodeView, type Nodes } from '../cluster/nodes.js';
import { ApiError } from '../errors.js';

export function registerNodes(
  app: FastifyInstance,
  deps: {
    nodes: () => Nodes | undefined;
    /** Sandboxes placed on a node (the placement index); none on SQLite, where nothing is placed. */
    sandboxesOn?: (node: string) => number;
  },
) {
  const view = (nodes: Nodes, n: NodeView) => {
    const { empty, ...holds } = holdingsOf(n, deps.sandboxesOn?.(n.id) ?? 0);
    const { handedOver: _, replicas: __, ...rest } = n;
    return { ...rest, holds, empty, self: n.id === nodes.self.id };
  };
  const operator = (req: FastifyRequest) => {
    const a = requireRole(req, 'admin');
    if (a.workspace !== DEFAULT_WORKSPACE)
      throw new ApiError(
        'FORBIDDEN',
        `the cluster's nodes are shown to the admins of workspace ${DEFAULT_WORKSPACE} only (the operator's)`,
      );
    const nodes = deps.nodes();
    if (!nodes) throw new ApiError('UNAVAILABLE', 'the server is starting; ask again');
    return nodes;
  };
  app.get('/nodes', async (req) => {
    const nodes = operator(req);
    return (await nodes.list()).map((n) => view(nodes, n));
  });
  for (const [verb, drained] of [
    ['drain', true],
    ['undrain', false],
  ] as const)
    app.post(`/nodes/:nodeId/${verb}`, async (req) => {
      const nodes = operator(req);
      const { nodeId: id } = req.params as { nodeId: string };
      try {
        const n = await nodes.drain(id, drained);
        if (!n)
          throw new ApiError(
            'NOT_FOUND',
            `node ${JSON.stringify(id)} not found (berth get nodes lists them)`,
          );
        return view(nodes, n);
      } catch (err) {
        if (err instanceof AloneError) throw new ApiError('CONFLICT', err.message);
        throw err;
      }
    });
}
