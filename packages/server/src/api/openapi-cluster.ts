// GET /nodes (nodes.ts), described for the OpenAPI document.
import { Type } from '../kinds/typebox.js';
import type { ExtraPaths } from './openapi-extra.js';

const Node = Type.Object(
  {
    id: Type.String({ description: 'the node (server) id, BERTH_NODE_ID or made once per data dir' }),
    address: Type.String({ description: 'where the other servers reach it' }),
    region: Type.String({ description: 'its first region (BERTH_REGIONS)' }),
    regions: Type.Array(Type.String(), {
      description: 'every region it serves: a sandbox asking for one of them may be placed on it',
    }),
    cores: Type.Integer(),
    memoryMb: Type.Integer(),
    instances: Type.Integer({ description: 'runtime instances it holds, as of its last heartbeat' }),
    warm: Type.Record(Type.String(), Type.Integer(), {
      description:
        'sandboxes ready in its warm pools by image (`default`, or `sha256:<id prefix>`), as of its last heartbeat',
    }),
    leads: Type.Array(Type.String(), { description: 'the roles it leads (e.g. `controllers`)' }),
    serving: Type.Array(Type.String(), {
      description:
        'the agents and functions it runs a live replica of (`<kind>/<workspace>/<name>`), as of its last heartbeat',
    }),
    epoch: Type.Integer({ description: 'bumped by each start of a server with this id' }),
    startedAt: Type.String({ format: 'date-time' }),
    heartbeatAt: Type.String({ format: 'date-time' }),
    healthy: Type.Boolean({ description: 'it heartbeated within its lease and did not stop' }),
    stopped: Type.Boolean({ description: 'it stopped cleanly' }),
    drained: Type.Boolean({ description: 'an operator drained it: it leads no role until undrained' }),
    quotas: Type.Optional(
      Type.Record(Type.String(), Type.Integer(), {
        description:
          'the workspace quotas it judges with (its BERTH_QUOTA_* settings: memoryMb, sandboxes, replicas, builds, jobTasks); every server of a cluster should have the same, and each logs a warning naming a node whose differ',
      }),
    ),
    holds: Type.Object(
      {
        sandboxes: Type.Integer({ description: 'sandboxes placed on it (not TERMINATED)' }),
        instances: Type.Integer({
          description:
            'runtime instances it runs (sandboxes, agent and function replicas, job tasks, builds) as of its last heartbeat; 0 once its lease lapsed',
        }),
        leads: Type.Array(Type.String(), {
          description: 'roles it leads, or handed over when drained and not yet taken over by another server',
        }),
      },
      { description: 'what it still holds: a drain is done when none is left (`empty`)' },
    ),
    empty: Type.Boolean({
      description:
        'it holds nothing: no sandbox placed on it, no instance running, no role led (`berth node drain --wait` waits for it)',
    }),
    self: Type.Boolean({ description: 'the server that answered' }),
  },
  { $id: 'ClusterNode' },
);

export const CLUSTER_PATHS: ExtraPaths = {
  '/nodes': {
    get: {
      tag: 'Cluster',
      operationId: 'listNodes',
      summary:
        "The cluster's servers with their capacity, load, the roles they lead and their health (admins of workspace `default`, the operator's, only)",
      role: 'admin',
      response: Type.Array(Node),
    },
  },
  '/nodes/{nodeId}/drain': {
    post: {
      tag: 'Cluster',
      operationId: 'drainNode',
      summary:
        'Drains a node: it gives up the roles it leads (what it held is started again, fresh, by the next leader), its sandboxes are placed on other nodes of their region, and it is not chosen to lead until undrained (admins of workspace `default` only). Answers at once; read the node (`holds`, `empty`) until it holds nothing, as `berth node drain --wait` does',
      role: 'admin',
      response: Node,
    },
  },
  '/nodes/{nodeId}/undrain': {
    post: {
      tag: 'Cluster',
      operationId: 'undrainNode',
      summary: 'Undrains a node: it may lead again (admins of workspace `default` only)',
      role: 'admin',
      response: Node,
    },
  },
};
