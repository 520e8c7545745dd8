// /v0/workspaces and their members. Any principal may create a workspace (it becomes its admin);
// everything else needs membership of the workspace in the path, and a workspace the caller is not
// a member of answers 404 exactly like one that does not exist. A principal of another tenant is not added
// but invited (invitations.ts): membership needs its consent.
import type { Static } from '@sinclair/typebox';
import { Type } from '../kinds/typebox.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/index.js';
import { checkInput } from './input.js';
import {
  K,
  keys,
  type MemberRecord,
  memberOps,
  removeInvitationOps,
  removeMemberOps,
  stamps,
  type WorkspaceRecord,
  workspacesOf,
} from '../auth/records.js';
import { Name } from '../kinds/common.js';
import { CUSTOM_DOMAIN_KIND } from '../kinds/custom-domain.js';
import { KINDS } from '../kinds/index.js';
import { IMAGE_NAMES_GONE_KIND } from '../runtime/images/gone-record.js';
import type { Role } from '../kinds/types.js';
import { StoreError, type WriteOp } from '../store/store.js';
import { ApiError, notFound } from '../errors.js';
import { removeMember, roleIn as roleInWorkspace, setMember } from './membership.js';
import { memberView, principalOf } from './members.js';
import { answerList } from './api-version.js';

export { memberView };

const RoleSchema = Type.Union([Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer')]);
const DisplayName = Type.String({ maxLength: 253 });

export const CreateBody = Type.Object(
  { name: Name, displayName: Type.Optional(DisplayName) },
  { additionalProperties: false },
);
export const UpdateBody = Type.Object(
  { name: Type.Optional(Name), displayName: Type.Optional(DisplayName) },
  { additionalProperties: false },
);
export const MemberBody = Type.Object({ role: RoleSchema }, { additionalProperties: false });
export const NewMemberBody = Type.Object(
  { subject: Type.String({ minLength: 1, maxLength: 253 }), role: RoleSchema },
  { additionalProperties: false },
);

export const workspaceView = (w: WorkspaceRecord) => ({
  name: w.name,
  displayName: w.displayName,
  createdAt: w.createdAt,
  updatedAt: w.updatedAt,
  createdBy: w.createdBy,
  updatedBy: w.updatedBy,
});

export interface WorkspaceHooks {
  /**
   * Removes what the server keeps on disk for a workspace just deleted (builds, caches), so that nothing of it is
   * found by a new workspace of the same name. A failure is logged: the records are gone, and the next start
   * removes what is left.
   */
  deleted?: (name: string) => Promise<void>;
}

export function registerWorkspaces(v0: FastifyInstance, ctx: AuthContext, hooks: WorkspaceHooks = {}) {
  const { store, authenticator } = ctx;

  /** The caller's role in the workspace of the path, or 404; then 403 below the needed role. */
  const roleIn = (req: FastifyRequest, ws: string, need: Role) =>
    roleInWorkspace(authenticator, req, ws, need);

  async function mustGetWorkspace(ws: string) {
    const o = await store.get(keys.workspace(ws));
    if (!o) throw new ApiError('NOT_FOUND', `workspace ${ws} not found`);
    return o;
  }

  v0.post('/workspaces', async (req, reply) => {
    const p = principalOf(req);
    const body = checkInput<Static<typeof CreateBody>>(CreateBody, req.body, reply);
    const st = stamps(p.subject, new Date());
    const rec: WorkspaceRecord = { name: body.name, displayName: body.displayName, ...st };
    try {
      await store.write([
        { op: 'create', key: keys.workspace(body.name), body: { ...rec } },
        ...memberOps(body.name, { subject: p.subject, subType: p.subType, role: 'admin', ...st }, false),
      ]);
    } catch (e) {
      if (e instanceof StoreError && e.reason === 'exists')
        throw new ApiError('ALREADY_EXISTS', `workspace ${body.name} already exists`, {
          code: 'WORKSPACE_ALREADY_EXISTS',
        });
      throw e;
    }
    return workspaceView(rec);
  });

  v0.get('/workspaces', async (req, reply) => {
    const p = principalOf(req);
    answerList(req, reply);
    const out = [];
    for (const ws of await workspacesOf(store, p.subject)) {
      const w = await store.get(keys.workspace(ws));
      if (w) out.push(workspaceView(w.body as WorkspaceRecord));
    }
    return out;
  });

  v0.get('/workspaces/:name', async (req) => {
    const { name } = req.params as { name: string };
    await roleIn(req, name, 'viewer');
    return workspaceView((await mustGetWorkspace(name)).body as WorkspaceRecord);
  });

  v0.put('/workspaces/:name', async (req, reply) => {
    const { name } = req.params as { name: string };
    const a = await roleIn(req, name, 'admin');
    const body = checkInput<Static<typeof UpdateBody>>(UpdateBody, req.body, reply);
    if (body.name !== undefined && body.name !== name)
      throw new ApiError('VALIDATION_FAILED', 'a workspace cannot be renamed', {
        errors: [{ pointer: '/name', message: `must equal the name in the path (${name})` }],
      });
    const cur = await mustGetWorkspace(name);
    const prev = cur.body as WorkspaceRecord;
    const next: WorkspaceRecord = {
      ...prev,
      displayName: body.displayName,
      ...stamps(a.principal.subject, new Date(), prev),
    };
    await store.write([
      { op: 'update', key: keys.workspace(name), body: { ...next }, expectVersion: cur.resourceVersion },
    ]);
    return workspaceView(next);
  });

  v0.delete('/workspaces/:name', async (req) => {
    const { name } = req.params as { name: string };
    await roleIn(req, name, 'admin');
    const cur = await mustGetWorkspace(name);
    const held: string[] = [];
    for (const kind of [...KINDS.map((k) => k.kind), K.serviceAccount, CUSTOM_DOMAIN_KIND]) {
      if ((await store.list({ kind, workspace: name, limit: 1 })).length) held.push(kind);
    }
    if (held.length)
      throw new ApiError(
        'INVALID_STATE',
        `workspace ${name} still holds ${held.join(', ')} objects; delete them first`,
      );
    const ops: WriteOp[] = [];
    for (const m of await store.list({ kind: K.member, workspace: name, parent: '' }))
      ops.push(...removeMemberOps(name, m.name));
    for (const i of await store.list({ kind: K.invitation, workspace: name, parent: '' }))
      ops.push(...removeInvitationOps(name, i.name));
    // The record of its image names let go of (a cluster's): a new workspace of the name starts with none.
    for (const o of await store.list({ kind: IMAGE_NAMES_GONE_KIND, workspace: name }))
      ops.push({ op: 'delete', key: o, expectVersion: o.resourceVersion });
    ops.push({ op: 'delete', key: keys.workspace(name), expectVersion: cur.resourceVersion });
    await store.write(ops);
    await hooks
      .deleted?.(name)
      .catch((err) => ctx.logger.error({ err, workspace: name }, 'workspace files left'));
    return workspaceView(cur.body as WorkspaceRecord);
  });

  v0.get('/workspaces/:name/members', async (req, reply) => {
    const { name } = req.params as { name: string };
    await roleIn(req, name, 'viewer');
    answerList(req, reply);
    const list = await store.list({ kind: K.member, workspace: name, parent: '' });
    return list.map((m) => memberView(m.body as MemberRecord));
  });

  async function setMemberOf(
    req: FastifyRequest,
    reply: FastifyReply,
    name: string,
    subject: string,
    role: Role,
  ) {
    const a = await roleIn(req, name, 'admin');
    const r = await setMember(store, a.principal.subject, name, subject, role);
    if (r.invited) reply.code(202);
    return r.view;
  }

  v0.put('/workspaces/:name/members/:subject', async (req, reply) => {
    const { name, subject } = req.params as { name: string; subject: string };
    await roleIn(req, name, 'admin');
    const body = checkInput<Static<typeof MemberBody>>(MemberBody, req.body, reply);
    return setMemberOf(req, reply, name, subject, body.role);
  });

  // The same with the subject in the body, for clients that add members to the collection.
  v0.post('/workspaces/:name/members', async (req, reply) => {
    const { name } = req.params as { name: string };
    await roleIn(req, name, 'admin');
    const body = checkInput<Static<typeof NewMemberBody>>(NewMemberBody, req.body, reply);
    return setMemberOf(req, reply, name, body.subject, body.role);
  });

  v0.delete('/workspaces/:name/members/:subject', async (req) => {
    const { name, subject } = req.params as { name: string; subject: string };
    await roleIn(req, name, 'admin');
    const rec = await removeMember(store, name, subject);
    if (!rec) throw notFound(`member ${subject} of workspace ${name}`);
    return memberView(rec);
  });
}
