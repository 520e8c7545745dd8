// The object routes a follower of a cluster sends to the server holding the instances (docs/decisions/056-cluster-
// postgres.md), although the object itself lives in the shared store: what they answer also comes from the holder's
// memory. A read of an agent, function or application: it shows the replicas running, which only the holder knows.
// (A write with `?upload=true` is answered where it arrives: its URL is signed, and any server takes it, decision
// 082.) The held routes about one sandbox go to the node it is placed on instead (heldSandboxOf).
import type { FastifyRequest } from 'fastify';

const REPLICA_COUNTED = /^\/v0\/(agents|functions|applications)\/[^/]+$/;

export function heldObjectRequest(req: FastifyRequest): boolean {
  const q = req.url.indexOf('?');
  const path = q < 0 ? req.url : req.url.slice(0, q);
  return req.method === 'GET' && REPLICA_COUNTED.test(path);
}

const SANDBOX_ROUTE = /^\/v0\/sandboxes\/([^/?]+)/;

/**
 * The sandbox a held route's request concerns (its debug report, snapshots, archive, fork: what lies on the node it
 * is placed on), in the caller's workspace as its credential says; undefined for any other route.
 */
export function heldSandboxOf(req: FastifyRequest): { workspace: string; name: string } | undefined {
  const m = SANDBOX_ROUTE.exec(req.url);
  if (!m || !req.access) return undefined;
  let name: string;
  try {
    name = decodeURIComponent(m[1]);
  } catch {
    return undefined;
  }
  return { workspace: req.access.workspace, name };
}
