// The service SDK's workspace users over Berth's membership model (decision 047): `/users` lists, invites, changes
// and removes the principals of the workspace the request acts in; `DELETE /workspaces/{ws}/leave` takes the
// caller out of one; `POST /workspaces/availability` says whether a workspace name can be created. Berth's
// principals are service accounts (and the subjects of a configured identity provider): they have no e-mail
// address, so `email` and `subOrEmail` name a principal by its subject (a service account's client id). An
// invitation grants nothing until the invitee, or an admin of its home workspace, accepts it
// (`POST /workspaces/{ws}/invitations/{subject}/accept`): `/users` invites every principal, its own tenant's too.
import type { Static } from '@sinclair/typebox';
import { Type } from '../kinds/typebox.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/index.js';
import { type InvitationRecord, K, keys, type MemberRecord, removeInvitationOps } from '../auth/records.js';
import { requireRole } from '../auth/require-role.js';
import { ApiError, notFound } from '../errors.js';
import { Name } from '../kinds/common.js';
import { answerList } from './api-version.js';
import { checkInput } from './input.js';
import { invite } from './invitations.js';
import { mustExist, removeMember, roleIn, setMember } from './membership.js';
import { principalOf } from './members.js';
import { workspaceView } from './workspaces.js';

const RoleSchema = Type.Union([Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer')]);

export const InviteBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 253 }),
    role: Type.Optional(RoleSchema),
  },
  { additionalProperties: false },
);
export const UserRoleBody = Type.Object({ role: RoleSchema }, { additionalProperties: false });
export const AvailabilityBody = Type.Object({ name: Name }, { additionalProperties: false });

/** A member (accepted) or an invitee (not yet) in the service's `WorkspaceUser` shape. */
export function workspaceUserView(r: MemberRecord | InvitationRecord, accepted: boolean) {
  return {
    sub: r.subject,
    role: r.role,
    accepted,
    expired: false,
    source: 'invitation' as const,
  };
}

/** An invitation in the service's `PendingInvitation` shape. */
export const pendingInvitationView = (i: InvitationRecord) => ({
  email: i.subject,
  workspace: i.workspace,
  role: i.role,
  invitedBy: i.createdBy,
  createdAt: i.createdAt,
  updatedAt: i.updatedAt,
  createdBy: i.createdBy,
  updatedBy: i.updatedBy,
});

export function registerWorkspaceUsers(v0: FastifyInstance, ctx: AuthContext) {
  const { store, authenticator } = ctx;

  /** The member or the invitee `subject` of `ws`, or 404. */
  async function userOf(ws: string, subject: string) {
    const m = await store.get(keys.member(ws, subject));
    if (m) return { member: m.body as MemberRecord };
    const i = await store.get(keys.invitation(ws, subject));
    if (i) return { invitation: i.body as InvitationRecord };
    throw notFound(`user ${subject} of workspace ${ws}`);
  }

  async function invitationOf(ws: string, subject: string): Promise<InvitationRecord> {
    const i = await store.get(keys.invitation(ws, subject));
    if (!i) throw notFound(`invitation of ${subject} to workspace ${ws}`);
    return i.body as InvitationRecord;
  }

  v0.get('/users', async (req, reply) => {
    const a = requireRole(req, 'viewer');
    answerList(req, reply);
    const members = await store.list({ kind: K.member, workspace: a.workspace, parent: '' });
    const invited = await store.list({ kind: K.invitation, workspace: a.workspace, parent: '' });
    return [
      ...members.map((m) => workspaceUserView(m.body as MemberRecord, true)),
      ...invited.map((i) => workspaceUserView(i.body as InvitationRecord, false)),
    ];
  });

  v0.post('/users', async (req, reply: FastifyReply) => {
    const a = requireRole(req, 'admin');
    const body = checkInput<Static<typeof InviteBody>>(InviteBody, req.body, reply);
    await mustExist(store, body.email);
    if (await store.get(keys.member(a.workspace, body.email)))
      throw new ApiError('ALREADY_EXISTS', `${body.email} is already a member of workspace ${a.workspace}`, {
        code: 'WORKSPACE_USER_ALREADY_EXISTS',
      });
    await invite(store, a.principal.subject, a.workspace, body.email, body.role ?? 'member');
    return pendingInvitationView(await invitationOf(a.workspace, body.email));
  });

  v0.put('/users/:subOrEmail', async (req, reply) => {
    const a = requireRole(req, 'admin');
    const { subOrEmail } = req.params as { subOrEmail: string };
    const body = checkInput<Static<typeof UserRoleBody>>(UserRoleBody, req.body, reply);
    const u = await userOf(a.workspace, subOrEmail);
    // An invitee is offered the new role; a member has it at once.
    if (u.invitation) {
      await invite(store, a.principal.subject, a.workspace, subOrEmail, body.role);
      return workspaceUserView(await invitationOf(a.workspace, subOrEmail), false);
    }
    const r = await setMember(store, a.principal.subject, a.workspace, subOrEmail, body.role);
    return r.invited ? workspaceUserView(u.member, true) : workspaceUserView(r.record, true);
  });

  v0.delete('/users/:subOrEmail', async (req) => {
    const a = requireRole(req, 'admin');
    const { subOrEmail } = req.params as { subOrEmail: string };
    const u = await userOf(a.workspace, subOrEmail);
    if (u.invitation) {
      await store.write(removeInvitationOps(a.workspace, subOrEmail));
      return workspaceUserView(u.invitation, false);
    }
    const rec = await removeMember(store, a.workspace, subOrEmail);
    if (!rec) throw notFound(`user ${subOrEmail} of workspace ${a.workspace}`);
    return workspaceUserView(rec, true);
  });

  // The caller leaves a workspace it is a member of (never its home: its keys act there).
  v0.delete('/workspaces/:workspaceName/leave', async (req: FastifyRequest) => {
    const { workspaceName } = req.params as { workspaceName: string };
    const a = await roleIn(authenticator, req, workspaceName, 'viewer');
    const w = await store.get(keys.workspace(workspaceName));
    if (!w) throw notFound(`workspace ${workspaceName}`);
    const rec = await removeMember(store, workspaceName, a.principal.subject);
    if (!rec) throw notFound(`workspace ${workspaceName}`);
    return workspaceView(w.body as Parameters<typeof workspaceView>[0]);
  });

  // Whether a workspace of this name can be created now (a name that is no DNS label is a 422, as on create);
  // `withReason=true` answers an object saying why not. It tells no more than a create would (a 409).
  v0.post('/workspaces/availability', async (req, reply) => {
    principalOf(req);
    const body = checkInput<Static<typeof AvailabilityBody>>(AvailabilityBody, req.body, reply);
    const taken = !!(await store.get(keys.workspace(body.name)));
    if ((req.query as Record<string, string> | undefined)?.withReason !== 'true') return !taken;
    return taken
      ? { available: false, reason: 'taken' as const, message: `workspace ${body.name} already exists` }
      : { available: true };
  });
}
