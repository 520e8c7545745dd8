// Identity records kept in the generic Store under their own kind strings (not envelope kinds).
// Layout (kind, workspace, parent, name):
//   Workspace        '_'   ''        <ws>          the workspace itself
//   Member           <ws>  ''        <subject>     role of a subject in a workspace
//   Membership       '_'   <subject> <ws>          reverse index: the workspaces of a subject
//   ServiceAccount   <ws>  ''        <clientId>    an account homed in <ws>; holds the secret's hash
//   ClientId         '_'   ''        <clientId>    index: clientId -> home workspace (token endpoint, JWTs)
//   ApiKey           <ws>  <clientId> <keyId>      key metadata (never the key)
//   ApiKeyHash       '_'   ''        <sha256>      index: key hash -> subject, expiry (one get per request)
//   Invitation       <ws>  ''        <subject>     a pending invitation of a principal of another tenant
//   InvitationFor    '_'   <subject> <ws>          reverse index: the pending invitations of a subject
import type { Role } from '../kinds/types.js';
import type { ExecutionScope } from './access.js';
import type { ResourceKey, Store, WriteOp } from '../store/store.js';

/** The pseudo-workspace of global indexes; `_` is not a DNS label, so no real workspace can take it. */
export const GLOBAL = '_';

export const K = {
  workspace: 'Workspace',
  member: 'Member',
  membership: 'Membership',
  serviceAccount: 'ServiceAccount',
  clientId: 'ClientId',
  apiKey: 'ApiKey',
  apiKeyHash: 'ApiKeyHash',
  invitation: 'Invitation',
  invitationFor: 'InvitationFor',
} as const;

/** A change to any of these kinds may change who a credential is or what it may do (invitations grant nothing). */
export const AUTH_KINDS = new Set<string>(
  Object.values(K).filter((k) => k !== K.invitation && k !== K.invitationFor),
);

export type SubType = 'user' | 'service_account';

export interface Stamps {
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  updatedBy: string;
}

export interface WorkspaceRecord extends Stamps {
  name: string;
  displayName?: string;
}

export interface MemberRecord extends Stamps {
  subject: string;
  subType: SubType;
  role: Role;
}

export interface ServiceAccountRecord {
  client_id: string;
  name: string;
  description?: string;
  workspace: string;
  /** sha256 (hex) of the client secret; the secret itself is shown once and never stored. */
  secretHash: string;
  created_at: string;
  updated_at: string;
  created_by: string;
}

export interface ApiKeyRecord extends Stamps {
  id: string;
  name?: string;
  expires_in?: string;
  /** Epoch ms; absent = never expires. */
  expiresAt?: number;
  hash: string;
  sub: string;
  sub_type: SubType;
}

/** What a request needs from a key: one get of this record. */
export interface ApiKeyHashRecord {
  id: string;
  sub: string;
  subType: SubType;
  workspace: string;
  expiresAt?: number;
  /** Set on a job execution's task credential (no member record: it has no role of its own). */
  scope?: ExecutionScope;
}

/** An offer of a role that grants nothing until the invitee (or an admin of its home workspace) accepts it. */
export interface InvitationRecord extends Stamps {
  workspace: string;
  subject: string;
  subType: SubType;
  role: Role;
}

export const keys = {
  workspace: (name: string): ResourceKey => ({ kind: K.workspace, workspace: GLOBAL, parent: '', name }),
  member: (ws: string, subject: string): ResourceKey => ({
    kind: K.member,
    workspace: ws,
    parent: '',
    name: subject,
  }),
  membership: (subject: string, ws: string): ResourceKey => ({
    kind: K.membership,
    workspace: GLOBAL,
    parent: subject,
    name: ws,
  }),
  serviceAccount: (ws: string, clientId: string): ResourceKey => ({
    kind: K.serviceAccount,
    workspace: ws,
    parent: '',
    name: clientId,
  }),
  clientId: (clientId: string): ResourceKey => ({
    kind: K.clientId,
    workspace: GLOBAL,
    parent: '',
    name: clientId,
  }),
  apiKey: (ws: string, clientId: string, id: string): ResourceKey => ({
    kind: K.apiKey,
    workspace: ws,
    parent: clientId,
    name: id,
  }),
  apiKeyHash: (hash: string): ResourceKey => ({
    kind: K.apiKeyHash,
    workspace: GLOBAL,
    parent: '',
    name: hash,
  }),
  invitation: (ws: string, subject: string): ResourceKey => ({
    kind: K.invitation,
    workspace: ws,
    parent: '',
    name: subject,
  }),
  invitationFor: (subject: string, ws: string): ResourceKey => ({
    kind: K.invitationFor,
    workspace: GLOBAL,
    parent: subject,
    name: ws,
  }),
};

/** Ops that drop a pending invitation with its reverse index. */
export function removeInvitationOps(ws: string, subject: string): WriteOp[] {
  return [
    { op: 'delete', key: keys.invitation(ws, subject) },
    { op: 'delete', key: keys.invitationFor(subject, ws) },
  ];
}

export function stamps(actor: string, now: Date, prev?: Stamps): Stamps {
  const t = now.toISOString();
  return {
    createdAt: prev?.createdAt ?? t,
    createdBy: prev?.createdBy ?? actor,
    updatedAt: t,
    updatedBy: actor,
  };
}

/** Ops that add a member (or change its role) with its reverse index. */
export function memberOps(ws: string, m: MemberRecord, existing: boolean, expectVersion?: number): WriteOp[] {
  if (existing) return [{ op: 'update', key: keys.member(ws, m.subject), body: { ...m }, expectVersion }];
  return [
    { op: 'create', key: keys.member(ws, m.subject), body: { ...m } },
    { op: 'create', key: keys.membership(m.subject, ws), body: { role: m.role } },
  ];
}

/** Ops that remove a member and its reverse index. */
export function removeMemberOps(ws: string, subject: string): WriteOp[] {
  return [
    { op: 'delete', key: keys.member(ws, subject) },
    { op: 'delete', key: keys.membership(subject, ws) },
  ];
}

export async function admins(store: Store, ws: string) {
  return (await store.list({ kind: K.member, workspace: ws, parent: '' })).filter(
    (m) => (m.body as MemberRecord).role === 'admin',
  );
}

/** The workspaces `subject` is a member of (any role), by name: the reverse index, one list. */
export async function workspacesOf(store: Store, subject: string): Promise<string[]> {
  return (await store.list({ kind: K.membership, workspace: GLOBAL, parent: subject })).map((m) => m.name);
}

/** Ops that delete a service account with its keys, their hash indexes and every membership. */
export async function deleteServiceAccountOps(store: Store, sa: ServiceAccountRecord): Promise<WriteOp[]> {
  const ops: WriteOp[] = [];
  const keyRecs = await store.list({ kind: K.apiKey, workspace: sa.workspace, parent: sa.client_id });
  for (const k of keyRecs) {
    ops.push({ op: 'delete', key: keys.apiKey(sa.workspace, sa.client_id, k.name) });
    ops.push({ op: 'delete', key: keys.apiKeyHash((k.body as ApiKeyRecord).hash) });
  }
  for (const ws of await workspacesOf(store, sa.client_id)) ops.push(...removeMemberOps(ws, sa.client_id));
  const invited = await store.list({ kind: K.invitationFor, workspace: GLOBAL, parent: sa.client_id });
  for (const i of invited) ops.push(...removeInvitationOps(i.name, sa.client_id));
  ops.push({ op: 'delete', key: keys.serviceAccount(sa.workspace, sa.client_id) });
  ops.push({ op: 'delete', key: keys.clientId(sa.client_id) });
  return ops;
}
