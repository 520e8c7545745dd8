// The live output of a job task's attempt running on this node, for the other servers of its cluster
// (docs/decisions/093-job-tasks-across-nodes.md): a task's log is served by the controllers' leader (its file keeps
// every ended attempt), which follows an attempt running on another node through that node's
// `GET /peer/job-tasks/<workspace>/<sandbox>/logs`. Only a server showing the cluster's peer token is answered, and
// only for a running task's sandbox owned by a job of that workspace (anything else is 404): the caller judged the
// tenant's right to the task, and the sandbox is looked up under its workspace.
import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TASK_ID_PREFIX, TASK_PROCESS } from '../controllers/job/job-task.js';
import { PEER_TOKEN_HEADER, showsPeerToken } from '../crypto/peer-token.js';
import { notFound } from '../errors.js';
import type { Instances } from '../runtime/instances.js';
import { DaemonClient } from '../sandbox-api/client.js';

/** A task sandbox's id (job-task.ts `sandboxId`): `job-<12 hex>-<index>-<attempt>`. */
const TASK_SANDBOX = new RegExp(`^${TASK_ID_PREFIX}[0-9a-f]{12}-\\d+-\\d+$`);

export function registerTaskLogPeerRoute(
  app: FastifyInstance,
  deps: { instances: Instances; token: string },
) {
  app.get('/peer/job-tasks/:workspace/:sandbox/logs', async (req: FastifyRequest, reply) => {
    const { workspace, sandbox } = req.params as { workspace: string; sandbox: string };
    if (!showsPeerToken(req.headers, deps.token) || !TASK_SANDBOX.test(sandbox)) throw notFound('task');
    const info = await deps.instances.driver.inspect(sandbox);
    if (!info || info.state === 'dead') throw notFound('task');
    if (info.owner?.kind !== 'Job' || info.owner.workspace !== workspace) throw notFound('task');
    const out = new PassThrough();
    const gone = new AbortController();
    reply.raw.once('close', () => gone.abort());
    const opened = await new Promise<boolean>((resolve) => {
      DaemonClient.at(info.socketPath)
        .logStream(TASK_PROCESS, (text) => out.write(text), gone.signal, { onOpen: () => resolve(true) })
        .then(resolve, () => resolve(false))
        .finally(() => out.end());
    });
    if (!opened) throw notFound('task');
    reply.type('text/plain; charset=utf-8');
    return out;
  });
}

/**
 * Follows the attempt running in `sandbox` on the node at `address` (its peer route above): false when that node has
 * nothing to stream (not started yet, ended, unreachable); true once streamed to its end or cut.
 */
export async function peerTaskLog(
  address: string,
  token: string,
  workspace: string,
  sandbox: string,
  write: (text: string) => void,
  signal: AbortSignal,
  onOpen: () => void,
): Promise<boolean> {
  let r: Response;
  try {
    r = await fetch(
      new URL(
        `/peer/job-tasks/${encodeURIComponent(workspace)}/${encodeURIComponent(sandbox)}/logs`,
        address,
      ),
      { headers: { [PEER_TOKEN_HEADER]: token }, signal },
    );
  } catch {
    return false;
  }
  if (r.status !== 200 || !r.body) {
    await r.body?.cancel().catch(() => undefined);
    return false;
  }
  onOpen();
  const dec = new TextDecoder();
  try {
    for await (const c of r.body) write(dec.decode(c, { stream: true }));
  } catch {
    // Cut (the node died, or the caller left): what came is written.
  }
  return true;
}
