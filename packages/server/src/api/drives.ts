// /v0/drives (the service's shared storage, beyond the specification) is not in this build: every verb answers a
// clear 501 rather than a bare 404 that reads like a missing drive. Decision 020 records the design it will take.
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { ApiError } from '../errors.js';

export const DRIVES_UNAVAILABLE =
  'drives are not available in this build; use a volume (/v0/volumes) for storage that outlives a sandbox';

export function register(v0: FastifyInstance) {
  const refuse = async (req: Parameters<typeof requireRole>[0]) => {
    requireRole(req, 'viewer');
    throw new ApiError('NOT_IMPLEMENTED', DRIVES_UNAVAILABLE);
  };
  v0.all('/drives', refuse);
  v0.all('/drives/*', refuse);
}
