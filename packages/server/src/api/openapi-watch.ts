// The routes added for the console, described for the OpenAPI document: GET /watch (watch.ts), GET /caller
// (caller.ts) and GET /{agents|functions}/{name}/replicas (workload-replicas.ts).
import { Type } from '../kinds/typebox.js';
import type { ExtraPaths } from './openapi-extra.js';

const Replica = Type.Object(
  {
    id: Type.String(),
    revision: Type.String(),
    role: Type.Union([Type.Literal('active'), Type.Literal('canary')]),
    inflight: Type.Integer({ description: 'requests in flight now' }),
    lastUsedAt: Type.String({ format: 'date-time' }),
    node: Type.Optional(
      Type.String({
        description:
          "in a cluster, the node running it (`berth get nodes`); another node's replica is as its last heartbeat said",
      }),
    ),
    standbyUntil: Type.Optional(
      Type.String({
        format: 'date-time',
        description:
          'set while the replica is kept frozen after a scale to zero (not serving, not counted in `replicas`): the next request wakes it; removed at this time',
      }),
    ),
  },
  { $id: 'WorkloadReplica' },
);

const replicas = (tag: 'Agent' | 'Function', param: string) => ({
  [`/${tag === 'Agent' ? 'agents' : 'functions'}/{${param}}/replicas`]: {
    get: {
      tag,
      operationId: `list${tag}Replicas`,
      summary: `The replicas serving the ${tag === 'Agent' ? 'agent' : 'function'} now, with their revision and share`,
      response: Type.Array(Replica),
    },
  },
});

export const WATCH_PATHS: ExtraPaths = {
  ...replicas('Agent', 'agentName'),
  ...replicas('Function', 'functionName'),
  '/caller': {
    get: {
      tag: 'Caller',
      operationId: 'getCaller',
      summary: 'Who the credential is, and its role in the workspace the request acts in',
      response: Type.Object(
        {
          subject: Type.String({ description: 'client ID of a service account, or a user subject' }),
          subjectType: Type.Union([Type.Literal('service_account'), Type.Literal('user')]),
          homeWorkspace: Type.String(),
          workspace: Type.String({ description: 'the workspace the request acts in' }),
          role: Type.Union([Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer')]),
        },
        { $id: 'Caller' },
      ),
    },
  },
  '/watch': {
    get: {
      tag: 'Watch',
      operationId: 'watchObjects',
      summary:
        "The workspace's objects, then (with follow) every change to them, as Server-Sent Events: `ADDED`, `MODIFIED`, `DELETED` with data `{kind, parent, object}` (the object as GET shows it), and `SYNCED` once the initial objects are sent",
      query: {
        kinds: Type.String({
          description:
            'kinds to watch by plural, comma-separated (e.g. `sandboxes,agents`); default every kind',
        }),
        follow: Type.Boolean({ description: 'stay open and send each change as it is written' }),
        initial: Type.Boolean({
          description: 'send the objects as they are now first (default true; at most 1000 of each kind)',
        }),
      },
      response: Type.String(),
      responseType: 'text/event-stream',
    },
  },
};
