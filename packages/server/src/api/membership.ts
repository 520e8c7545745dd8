// The rules of membership that `/workspaces/{ws}/members` and the service's `/users` share: who may be added at once
// and who is invited instead, the last admin, and the home workspace of a service account.
import type { FastifyRequest } from 'fastify';
import { atLeast } from '../auth/access.js';
import type { AuthenticatorImpl } from '../auth/authenticator.js';
import { admins, keys, type MemberRecord, memberOps, removeMemberOps, stamps } from '../auth/records.js';
import { mayActFor } from '../auth/tenancy.js';
import { ApiError, notFound } from '../errors.js';
import type { Role } from '../kinds/types.js';
import type { Store } from '../store/store.js';
import { invite } from './invitations.js';
import { memberView, principalOf } from './members.js';

/** The caller's access in the workspace `ws`, or 404 when not a member; then 403 below the needed role. */
export async function roleIn(authenticator: AuthenticatorImpl, req: FastifyRequest, ws: string, need: Role) {
  const a = await authenticator.accessIn(principalOf(req), ws);
  if (!atLeast(a.role, need))
    throw new ApiError('FORBIDDEN', `role ${a.role} in workspace ${ws} cannot do this (needs ${need})`);
  return a;
}

async function refuseLastAdmin(store: Store, ws: string, subject: string) {
  const others = (await admins(store, ws)).filter((m) => m.name !== subject);
  if (!others.length)
    throw new ApiError(
      'INVALID_STATE',
      `${subject} is the last admin of workspace ${ws}; make another admin first`,
    );
}

/** 404 unless `subject` names a principal of this server. */
export async function mustExist(store: Store, subject: string) {
  if (!(await store.get(keys.clientId(subject)))) throw notFound(`service account ${subject}`);
}

/**
 * Adds `subject` to `ws` with `role`, or changes the role of a member. Only a principal `actor` already answers for
 * joins at once; anyone else is invited (its consent is needed).
 */
export async function setMember(store: Store, actor: string, ws: string, subject: string, role: Role) {
  await mustExist(store, subject);
  const cur = await store.get(keys.member(ws, subject));
  if (!cur && !(await mayActFor(store, actor, subject)))
    return { invited: true as const, view: await invite(store, actor, ws, subject, role) };
  const prev = cur?.body as MemberRecord | undefined;
  if (prev?.role === 'admin' && role !== 'admin') await refuseLastAdmin(store, ws, subject);
  const rec: MemberRecord = {
    subject,
    subType: prev?.subType ?? 'service_account',
    role,
    ...stamps(actor, new Date(), prev),
  };
  await store.write(memberOps(ws, rec, !!cur, cur?.resourceVersion));
  return { invited: false as const, view: memberView(rec), record: rec };
}

/**
 * Removes `subject` from `ws`: never its last admin, and never a service account from its home workspace (it
 * would lose the workspace its keys act in). Returns the removed record, or undefined when it is not a member.
 */
export async function removeMember(
  store: Store,
  ws: string,
  subject: string,
): Promise<MemberRecord | undefined> {
  const cur = await store.get(keys.member(ws, subject));
  if (!cur) return undefined;
  const rec = cur.body as MemberRecord;
  if (rec.role === 'admin') await refuseLastAdmin(store, ws, subject);
  const home = await store.get(keys.clientId(subject));
  if (home?.body.workspace === ws)
    throw new ApiError(
      'INVALID_STATE',
      `workspace ${ws} is the home of service account ${subject}; delete the account or change its role instead`,
    );
  await store.write(removeMemberOps(ws, subject));
  return rec;
}
