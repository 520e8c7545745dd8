// Invitations: how a workspace admin offers a role to a principal of another tenant (docs/security.md, "Tenancy").
// The offer is visible to the invitee and grants nothing until the invitee, or an admin of its home workspace,
// accepts it; the workspace's admins may withdraw it and the invitee may decline it. To anyone else an invitation
// answers 404, like a workspace they are not a member of.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { atLeast } from '../auth/access.js';
import type { AuthContext } from '../auth/index.js';
import {
  GLOBAL,
  type InvitationRecord,
  K,
  keys,
  type MemberRecord,
  memberOps,
  removeInvitationOps,
  stamps,
} from '../auth/records.js';
import { mayActFor } from '../auth/tenancy.js';
import type { Role } from '../kinds/types.js';
import type { Store } from '../store/store.js';
import { ApiError, notFound } from '../errors.js';
import { invitationView, memberView, principalOf } from './members.js';
import { answerList } from './api-version.js';

/** Writes (or re-offers with a new role) a pending invitation of `subject` to workspace `ws`. */
export async function invite(store: Store, actor: string, ws: string, subject: string, role: Role) {
  const cur = await store.get(keys.invitation(ws, subject));
  const prev = cur?.body as InvitationRecord | undefined;
  const rec: InvitationRecord = {
    workspace: ws,
    subject,
    subType: 'service_account',
    role,
    ...stamps(actor, new Date(), prev),
  };
  await store.write(
    cur
      ? [
          {
            op: 'update',
            key: keys.invitation(ws, subject),
            body: { ...rec },
            expectVersion: cur.resourceVersion,
          },
        ]
      : [
          { op: 'create', key: keys.invitation(ws, subject), body: { ...rec } },
          { op: 'create', key: keys.invitationFor(subject, ws), body: {} },
        ],
  );
  return invitationView(rec);
}

export function registerInvitations(v0: FastifyInstance, ctx: AuthContext) {
  const { store, authenticator } = ctx;

  /** The caller's role in `ws`, or undefined when it is not a member (no error: invitees are not). */
  async function roleOf(req: FastifyRequest, ws: string): Promise<Role | undefined> {
    try {
      return (await authenticator.accessIn(principalOf(req), ws)).role;
    } catch {
      return undefined;
    }
  }

  /** The invitation, when the caller may act for its invitee; else 404 (nothing is told about others). */
  async function mineOr404(req: FastifyRequest, ws: string, subject: string) {
    const cur = await store.get(keys.invitation(ws, subject));
    if (!cur || !(await mayActFor(store, principalOf(req).subject, subject)))
      throw notFound(`invitation of ${subject} to workspace ${ws}`);
    return cur;
  }

  // The invitations addressed to the caller, or (for an admin of its home workspace) to `?subject=`.
  v0.get('/invitations', async (req, reply) => {
    answerList(req, reply);
    const q = (req.query ?? {}) as Record<string, string>;
    const subject = q.subject ?? principalOf(req).subject;
    if (!(await mayActFor(store, principalOf(req).subject, subject))) return [];
    const out = [];
    for (const i of await store.list({ kind: K.invitationFor, workspace: GLOBAL, parent: subject })) {
      const o = await store.get(keys.invitation(i.name, subject));
      if (o) out.push(invitationView(o.body as InvitationRecord));
    }
    return out;
  });

  v0.get('/workspaces/:name/invitations', async (req, reply) => {
    answerList(req, reply);
    const { name } = req.params as { name: string };
    const a = await authenticator.accessIn(principalOf(req), name);
    if (!atLeast(a.role, 'admin'))
      throw new ApiError('FORBIDDEN', `role ${a.role} in workspace ${name} cannot do this (needs admin)`);
    const list = await store.list({ kind: K.invitation, workspace: name, parent: '' });
    return list.map((o) => invitationView(o.body as InvitationRecord));
  });

  v0.post('/workspaces/:name/invitations/:subject/accept', async (req) => {
    const { name, subject } = req.params as { name: string; subject: string };
    const cur = await mineOr404(req, name, subject);
    const inv = cur.body as InvitationRecord;
    const member: MemberRecord = {
      subject,
      subType: inv.subType,
      role: inv.role,
      ...stamps(principalOf(req).subject, new Date()),
    };
    // The invitation goes in the same write, at the version read: a role changed meanwhile is not accepted blind.
    await store.write([
      { op: 'delete', key: keys.invitation(name, subject), expectVersion: cur.resourceVersion },
      { op: 'delete', key: keys.invitationFor(subject, name) },
      ...memberOps(name, member, false),
    ]);
    return memberView(member);
  });

  // Withdrawn by an admin of the workspace, or declined by the invitee (or an admin of its home workspace).
  v0.delete('/workspaces/:name/invitations/:subject', async (req) => {
    const { name, subject } = req.params as { name: string; subject: string };
    const cur = await store.get(keys.invitation(name, subject));
    const allowed =
      cur &&
      ((await roleOf(req, name)) === 'admin' || (await mayActFor(store, principalOf(req).subject, subject)));
    if (!cur || !allowed) throw notFound(`invitation of ${subject} to workspace ${name}`);
    await store.write(removeInvitationOps(name, subject));
    return invitationView(cur.body as InvitationRecord);
  });
}
