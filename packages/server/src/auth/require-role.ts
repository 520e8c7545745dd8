// Role checks of a request against the access its credential resolved to (§5): the one place that says who may.
import './request-access.js';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import type { Role } from '../kinds/types.js';
import { atLeast } from './access.js';

export function requireRole(req: FastifyRequest, need: Role) {
  const a = req.access;
  if (!a) throw new ApiError('UNAUTHENTICATED', 'a bearer credential is required');
  if (!atLeast(a.role, need))
    throw new ApiError(
      'FORBIDDEN',
      `role ${a.role} in workspace ${a.workspace} cannot do this (needs ${need})`,
    );
  return a;
}

/** `show_secrets=true` needs the workspace admin role (§5). */
export function wantsSecrets(req: FastifyRequest) {
  const q = (req.query ?? {}) as Record<string, string>;
  if (q.show_secrets !== 'true') return false;
  requireRole(req, 'admin');
  return true;
}
