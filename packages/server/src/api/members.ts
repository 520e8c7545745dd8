// What the member and invitation routes share: the caller's principal and the wire views of the records.
import type { FastifyRequest } from 'fastify';
import type { Principal } from '../auth/access.js';
import type { InvitationRecord, MemberRecord } from '../auth/records.js';
import { ApiError } from '../errors.js';

export function principalOf(req: FastifyRequest): Principal {
  if (!req.access) throw new ApiError('UNAUTHENTICATED', 'a bearer credential is required');
  return req.access.principal;
}

export const memberView = (m: MemberRecord) => ({
  subject: m.subject,
  subType: m.subType,
  role: m.role,
  createdAt: m.createdAt,
  updatedAt: m.updatedAt,
  createdBy: m.createdBy,
  updatedBy: m.updatedBy,
});

export const invitationView = (i: InvitationRecord) => ({
  workspace: i.workspace,
  subject: i.subject,
  subType: i.subType,
  role: i.role,
  status: 'PENDING' as const,
  createdAt: i.createdAt,
  updatedAt: i.updatedAt,
  createdBy: i.createdBy,
  updatedBy: i.updatedBy,
});
