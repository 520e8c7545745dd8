// /v0/service_accounts and their API keys (docs/compat.md, spec §2.14), admin of the workspace only.
// Secrets (client_secret, apiKey) appear once, in the creation response; the store holds sha256 hashes.
import type { Static } from '@sinclair/typebox';
import { Type } from '../kinds/typebox.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  newApiKey,
  newClientId,
  newClientSecret,
  newKeyId,
  sha256,
  durationMs,
} from '../auth/credentials.js';
import type { AuthContext } from '../auth/index.js';
import { checkInput } from './input.js';
import {
  type ApiKeyHashRecord,
  type ApiKeyRecord,
  admins,
  deleteServiceAccountOps,
  K,
  keys,
  type MemberRecord,
  memberOps,
  type ServiceAccountRecord,
  stamps,
} from '../auth/records.js';
import { DURATION_PATTERN } from '../kinds/common.js';
import { ApiError, invalid, notFound } from '../errors.js';
import { requireRole } from '../auth/require-role.js';
import { answerList } from './api-version.js';

const SaName = Type.String({ minLength: 1, maxLength: 253 });
const Description = Type.String({ maxLength: 1024 });
export const CreateBody = Type.Object(
  {
    name: SaName,
    description: Type.Optional(Description),
    role: Type.Optional(Type.Union([Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer')])),
  },
  { additionalProperties: false },
);
export const UpdateBody = Type.Object(
  { name: Type.Optional(SaName), description: Type.Optional(Description) },
  { additionalProperties: false },
);
export const KeyBody = Type.Object(
  {
    expires_in: Type.Optional(Type.String({ pattern: DURATION_PATTERN })),
    name: Type.Optional(Type.String({ maxLength: 253 })),
  },
  { additionalProperties: false },
);

export const serviceAccountView = (r: ServiceAccountRecord, clientSecret?: string) => ({
  client_id: r.client_id,
  ...(clientSecret ? { client_secret: clientSecret } : {}),
  name: r.name,
  description: r.description,
  created_at: r.created_at,
  updated_at: r.updated_at,
  created_by: r.created_by,
});

export const apiKeyView = (r: ApiKeyRecord, apiKey?: string) => ({
  ...(apiKey ? { apiKey } : {}),
  id: r.id,
  name: r.name,
  expires_in: r.expires_in,
  sub: r.sub,
  sub_type: r.sub_type,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
  createdBy: r.createdBy,
  updatedBy: r.updatedBy,
});

export function registerServiceAccounts(v0: FastifyInstance, ctx: AuthContext) {
  const { store } = ctx;

  async function mustGet(req: FastifyRequest) {
    const a = requireRole(req, 'admin');
    const { clientId } = req.params as { clientId: string };
    const o = await store.get(keys.serviceAccount(a.workspace, clientId));
    if (!o) throw notFound(`service account ${clientId}`);
    return { a, o, sa: o.body as ServiceAccountRecord };
  }

  v0.post('/service_accounts', async (req, reply) => {
    const a = requireRole(req, 'admin');
    const body = checkInput<Static<typeof CreateBody>>(CreateBody, req.body, reply);
    const now = new Date();
    const st = stamps(a.principal.subject, now);
    const secret = newClientSecret();
    const sa: ServiceAccountRecord = {
      client_id: newClientId(),
      name: body.name,
      description: body.description,
      workspace: a.workspace,
      secretHash: sha256(secret),
      created_at: st.createdAt,
      updated_at: st.updatedAt,
      created_by: a.principal.subject,
    };
    const member: MemberRecord = {
      subject: sa.client_id,
      subType: 'service_account',
      role: body.role ?? 'member',
      ...st,
    };
    await store.write([
      { op: 'create', key: keys.serviceAccount(a.workspace, sa.client_id), body: { ...sa } },
      { op: 'create', key: keys.clientId(sa.client_id), body: { workspace: a.workspace } },
      ...memberOps(a.workspace, member, false),
    ]);
    return serviceAccountView(sa, secret);
  });

  v0.get('/service_accounts', async (req, reply) => {
    const a = requireRole(req, 'admin');
    answerList(req, reply);
    const list = await store.list({ kind: K.serviceAccount, workspace: a.workspace, parent: '' });
    return list.map((o) => serviceAccountView(o.body as ServiceAccountRecord));
  });

  v0.get('/service_accounts/:clientId', async (req) => serviceAccountView((await mustGet(req)).sa));

  v0.put('/service_accounts/:clientId', async (req, reply) => {
    const { o, sa } = await mustGet(req);
    const body = checkInput<Static<typeof UpdateBody>>(UpdateBody, req.body, reply);
    const next: ServiceAccountRecord = {
      ...sa,
      name: body.name ?? sa.name,
      description: body.description ?? sa.description,
      updated_at: new Date().toISOString(),
    };
    await store.write([
      {
        op: 'update',
        key: keys.serviceAccount(sa.workspace, sa.client_id),
        body: { ...next },
        expectVersion: o.resourceVersion,
      },
    ]);
    return serviceAccountView(next);
  });

  v0.delete('/service_accounts/:clientId', async (req) => {
    const { sa } = await mustGet(req);
    // Deleting the last admin of a workspace would leave it unmanageable.
    for (const m of await store.list({ kind: K.membership, workspace: '_', parent: sa.client_id })) {
      const rec = await store.get(keys.member(m.name, sa.client_id));
      if ((rec?.body as MemberRecord | undefined)?.role !== 'admin') continue;
      if ((await admins(store, m.name)).length <= 1)
        throw new ApiError(
          'INVALID_STATE',
          `service account ${sa.client_id} is the last admin of workspace ${m.name}`,
        );
    }
    await store.write(await deleteServiceAccountOps(store, sa));
    return serviceAccountView(sa);
  });

  v0.post('/service_accounts/:clientId/api_keys', async (req, reply) => {
    const { a, sa } = await mustGet(req);
    const body = checkInput<Static<typeof KeyBody>>(KeyBody, req.body, reply, true);
    const now = new Date();
    let expiresAt: number | undefined;
    if (body.expires_in !== undefined) {
      const ms = durationMs(body.expires_in);
      if (ms === undefined)
        throw invalid([
          { pointer: '/expires_in', message: 'must be a positive duration such as 30d, 24h, 1w' },
        ]);
      expiresAt = now.getTime() + ms;
    }
    const apiKey = newApiKey();
    const hash = sha256(apiKey);
    const rec: ApiKeyRecord = {
      id: newKeyId(),
      name: body.name,
      expires_in: body.expires_in,
      expiresAt,
      hash,
      sub: sa.client_id,
      sub_type: 'service_account',
      ...stamps(a.principal.subject, now),
    };
    const index: ApiKeyHashRecord = {
      id: rec.id,
      sub: sa.client_id,
      subType: 'service_account',
      workspace: sa.workspace,
      expiresAt,
    };
    await store.write([
      { op: 'create', key: keys.apiKey(sa.workspace, sa.client_id, rec.id), body: { ...rec } },
      { op: 'create', key: keys.apiKeyHash(hash), body: { ...index } },
    ]);
    return apiKeyView(rec, apiKey);
  });

  v0.get('/service_accounts/:clientId/api_keys', async (req, reply) => {
    const { sa } = await mustGet(req);
    answerList(req, reply);
    const list = await store.list({ kind: K.apiKey, workspace: sa.workspace, parent: sa.client_id });
    return list.map((o) => apiKeyView(o.body as ApiKeyRecord));
  });

  v0.delete('/service_accounts/:clientId/api_keys/:apiKeyId', async (req) => {
    const { sa } = await mustGet(req);
    const { apiKeyId } = req.params as { apiKeyId: string };
    const o = await store.get(keys.apiKey(sa.workspace, sa.client_id, apiKeyId));
    if (!o) throw notFound(`API key ${apiKeyId}`);
    const rec = o.body as ApiKeyRecord;
    await store.write([
      { op: 'delete', key: keys.apiKey(sa.workspace, sa.client_id, apiKeyId) },
      { op: 'delete', key: keys.apiKeyHash(rec.hash) },
    ]);
    return apiKeyView(rec);
  });
}
