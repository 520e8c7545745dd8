// The routes that are not generic CRUD (accounts, keys, tokens, workspaces, catalog, sub-resources),
// described once for the OpenAPI document. Shapes follow the route modules that serve them.
import { type TSchema, Type } from '@sinclair/typebox';
import { DURATION_PATTERN, Name, Timestamp } from '../kinds/common.js';
import { VolumeTemplateVersion as VersionSchema } from '../kinds/volume-template.js';
import { Template } from '../templates/schema.js';

export interface ExtraOperation {
  operationId: string;
  summary: string;
  /** Tag grouping the operation (a kind name, or a topic such as `ServiceAccount`). */
  tag: string;
  body?: TSchema;
  bodyOptional?: boolean;
  /** The body may also be sent form-encoded (the OAuth token endpoint). */
  formBody?: boolean;
  query?: Record<string, TSchema>;
  /** A list served by api/pagination.ts: limit, cursor and labels, next-page headers. */
  paged?: boolean;
  response?: TSchema;
  responseType?: string;
  responseDescription?: string;
  /** Success status; 200 unless said. */
  status?: number;
  /** Answers without a credential. */
  public?: boolean;
  /** Error body when it is not a problem (the OAuth endpoint answers RFC 6749 errors). */
  errorBody?: TSchema;
  /** Documented only when a kind of this name is served (sub-resources of kinds that land later). */
  requiresKind?: string;
}

export type ExtraPaths = Record<string, Partial<Record<'get' | 'post' | 'put' | 'delete', ExtraOperation>>>;

const opt = Type.Optional;
const Str = Type.String;
const ref = (id: string) => Type.Unsafe<unknown>({ $ref: id });
/** A copy of a schema defined elsewhere, named so the document lists it once under components. */
const named = <T extends TSchema>(schema: T, $id: string): T => ({ ...schema, $id });
const Role = Type.Union([Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer')]);
const SubType = Type.Union([Type.Literal('user'), Type.Literal('service_account')]);

const ServiceAccountFields = {
  client_id: Str(),
  name: Str(),
  description: opt(Str()),
  created_at: Str(),
  updated_at: Str(),
  created_by: Str(),
};
const ServiceAccount = Type.Object(ServiceAccountFields, { $id: 'ServiceAccount' });
const ServiceAccountCreated = Type.Object(
  { ...ServiceAccountFields, client_secret: Str({ description: 'shown only in this answer' }) },
  { $id: 'ServiceAccountCreated' },
);
const ServiceAccountInput = Type.Object(
  {
    name: Str({ minLength: 1, maxLength: 253 }),
    description: opt(Str({ maxLength: 1024 })),
    role: opt({ ...Role, description: 'role in the workspace (default member)' }),
  },
  { $id: 'ServiceAccountInput' },
);
const ServiceAccountUpdate = Type.Object(
  { name: opt(Str({ minLength: 1, maxLength: 253 })), description: opt(Str({ maxLength: 1024 })) },
  { $id: 'ServiceAccountUpdate' },
);

const ApiKeyFields = {
  id: Str(),
  name: opt(Str()),
  expires_in: opt(Str({ description: 'duration such as 30d, 24h, 1w; absent = never expires' })),
  sub: Str(),
  sub_type: SubType,
  createdAt: Str(),
  updatedAt: Str(),
  createdBy: Str(),
  updatedBy: Str(),
};
const ApiKey = Type.Object(ApiKeyFields, { $id: 'ApiKey' });
const ApiKeyCreated = Type.Object(
  { ...ApiKeyFields, apiKey: Str({ description: 'the key; shown only in this answer' }) },
  { $id: 'ApiKeyCreated' },
);
const ApiKeyInput = Type.Object(
  { name: opt(Str({ maxLength: 253 })), expires_in: opt(Str({ pattern: DURATION_PATTERN })) },
  { $id: 'ApiKeyInput' },
);

const TokenRequest = Type.Object(
  {
    grant_type: Type.Literal('client_credentials'),
    client_id: opt(Str()),
    client_secret: opt(Str()),
  },
  { $id: 'TokenRequest', description: 'client credentials in the body, or instead as HTTP Basic (not both)' },
);
const TokenResponse = Type.Object(
  {
    access_token: Str(),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ description: 'seconds' }),
  },
  { $id: 'TokenResponse' },
);
const OAuthError = Type.Object(
  {
    error: Type.Union(
      ['invalid_request', 'invalid_client', 'unsupported_grant_type', 'server_error'].map((e) =>
        Type.Literal(e),
      ),
    ),
    error_description: Str(),
  },
  { $id: 'OAuthError', description: 'RFC 6749 error' },
);

const Stamps = { createdAt: Str(), updatedAt: Str(), createdBy: Str(), updatedBy: Str() };
const Workspace = Type.Object({ name: Str(), displayName: opt(Str()), ...Stamps }, { $id: 'Workspace' });
const WorkspaceInput = Type.Object(
  { name: Name, displayName: opt(Str({ maxLength: 253 })) },
  { $id: 'WorkspaceInput' },
);
const WorkspaceUpdate = Type.Object(
  {
    name: opt({ ...Name, description: 'must equal the name in the path' }),
    displayName: opt(Str({ maxLength: 253 })),
  },
  { $id: 'WorkspaceUpdate' },
);
const Member = Type.Object({ subject: Str(), subType: SubType, role: Role, ...Stamps }, { $id: 'Member' });
const MemberInput = Type.Object(
  { subject: Str({ minLength: 1, maxLength: 253, description: 'service account client ID' }), role: Role },
  { $id: 'MemberInput' },
);
const MemberRole = Type.Object({ role: Role }, { $id: 'MemberRole' });

const PreviewToken = Type.Object(
  {
    metadata: Type.Object({
      name: Str(),
      previewName: Str(),
      resourceName: Str({ description: 'the sandbox' }),
      resourceType: Type.Literal('Sandbox'),
      workspace: Str(),
    }),
    spec: Type.Object({
      token: opt(Str({ description: 'only in the creation answer' })),
      expiresAt: Str(),
      expired: Type.Boolean(),
    }),
  },
  { $id: 'PreviewToken' },
);
const PreviewTokenInput = Type.Object(
  {
    metadata: opt(Type.Object({ name: opt({ ...Name, description: 'default: a generated name' }) })),
    spec: Type.Object({ expiresAt: Timestamp }),
  },
  { $id: 'PreviewTokenInput' },
);

const VolumeTemplateVersion = named(VersionSchema, 'VolumeTemplateVersion');
const VolumeTemplateVersionInput = Type.Object(
  {
    region: opt(Str({ description: 'default: the first region served' })),
    contentSize: opt(Type.Integer({ minimum: 0 })),
    bucket: opt(Str({ maxLength: 253 })),
  },
  { $id: 'VolumeTemplateVersionInput' },
);

const SA = 'ServiceAccount';
const SA_KEYS = '/service_accounts/{clientId}/api_keys';
const TOKENS = '/sandboxes/{sandboxName}/previews/{previewName}/tokens';
const VERSIONS = '/volume_templates/{volumeTemplateName}/versions';

export const EXTRA_PATHS: ExtraPaths = {
  '/openapi.json': {
    get: {
      operationId: 'getOpenApiDocument',
      summary: 'This document',
      tag: 'Meta',
      public: true,
      response: Type.Object({}),
    },
  },
  '/oauth/token': {
    post: {
      operationId: 'issueToken',
      summary: 'Issue a JWT for a service account (grant client_credentials)',
      tag: 'OAuth',
      public: true,
      body: TokenRequest,
      formBody: true,
      response: TokenResponse,
      errorBody: OAuthError,
    },
  },
  '/service_accounts': {
    get: {
      operationId: 'listServiceAccounts',
      summary: 'List service accounts',
      tag: SA,
      response: Type.Array(ServiceAccount),
    },
    post: {
      operationId: 'createServiceAccount',
      summary: 'Create a service account (the client secret is shown once)',
      tag: SA,
      body: ServiceAccountInput,
      response: ServiceAccountCreated,
    },
  },
  '/service_accounts/{clientId}': {
    get: {
      operationId: 'getServiceAccount',
      summary: 'Get a service account',
      tag: SA,
      response: ServiceAccount,
    },
    put: {
      operationId: 'updateServiceAccount',
      summary: 'Change name or description of a service account',
      tag: SA,
      body: ServiceAccountUpdate,
      response: ServiceAccount,
    },
    delete: {
      operationId: 'deleteServiceAccount',
      summary: 'Delete a service account and its keys',
      tag: SA,
      response: ServiceAccount,
    },
  },
  [SA_KEYS]: {
    get: {
      operationId: 'listApiKeys',
      summary: 'List the API keys of a service account',
      tag: SA,
      response: Type.Array(ApiKey),
    },
    post: {
      operationId: 'createApiKey',
      summary: 'Create an API key (the key is shown once)',
      tag: SA,
      body: ApiKeyInput,
      bodyOptional: true,
      response: ApiKeyCreated,
    },
  },
  [`${SA_KEYS}/{apiKeyId}`]: {
    delete: { operationId: 'deleteApiKey', summary: 'Revoke an API key', tag: SA, response: ApiKey },
  },
  '/workspaces': {
    get: {
      operationId: 'listWorkspaces',
      summary: 'Workspaces the caller belongs to',
      tag: 'Workspace',
      response: Type.Array(Workspace),
    },
    post: {
      operationId: 'createWorkspace',
      summary: 'Create a workspace',
      tag: 'Workspace',
      body: WorkspaceInput,
      response: Workspace,
    },
  },
  '/workspaces/{workspaceName}': {
    get: { operationId: 'getWorkspace', summary: 'Get a workspace', tag: 'Workspace', response: Workspace },
    put: {
      operationId: 'updateWorkspace',
      summary: 'Change the display name of a workspace',
      tag: 'Workspace',
      body: WorkspaceUpdate,
      response: Workspace,
    },
    delete: {
      operationId: 'deleteWorkspace',
      summary: 'Delete an empty workspace',
      tag: 'Workspace',
      response: Workspace,
    },
  },
  '/workspaces/{workspaceName}/members': {
    get: {
      operationId: 'listMembers',
      summary: 'Members of a workspace',
      tag: 'Workspace',
      response: Type.Array(Member),
    },
    post: {
      operationId: 'addMember',
      summary: 'Add a member or change its role',
      tag: 'Workspace',
      body: MemberInput,
      response: Member,
    },
  },
  '/workspaces/{workspaceName}/members/{subject}': {
    put: {
      operationId: 'setMemberRole',
      summary: 'Add a member or change its role',
      tag: 'Workspace',
      body: MemberRole,
      response: Member,
    },
    delete: { operationId: 'removeMember', summary: 'Remove a member', tag: 'Workspace', response: Member },
  },
  '/templates': {
    get: {
      operationId: 'listTemplates',
      summary: 'The template catalog',
      tag: 'Template',
      response: Type.Array(Template),
    },
  },
  '/templates/{templateName}': {
    get: { operationId: 'getTemplate', summary: 'Get a template', tag: 'Template', response: Template },
  },
  [TOKENS]: {
    get: {
      operationId: 'listPreviewTokens',
      summary: 'Tokens of a private preview',
      tag: 'PreviewToken',
      requiresKind: 'Preview',
      paged: true,
      response: Type.Array(PreviewToken),
    },
    post: {
      operationId: 'createPreviewToken',
      summary: 'Create a token for a private preview',
      tag: 'PreviewToken',
      requiresKind: 'Preview',
      body: PreviewTokenInput,
      response: PreviewToken,
    },
  },
  [`${TOKENS}/{tokenName}`]: {
    delete: {
      operationId: 'deletePreviewToken',
      summary: 'Revoke a preview token',
      tag: 'PreviewToken',
      requiresKind: 'Preview',
      response: PreviewToken,
    },
  },
  [VERSIONS]: {
    get: {
      operationId: 'listVolumeTemplateVersions',
      summary: 'Versions of a volume template',
      tag: 'VolumeTemplate',
      requiresKind: 'VolumeTemplate',
      response: Type.Array(VolumeTemplateVersion),
    },
  },
  [`${VERSIONS}/{versionName}`]: {
    put: {
      operationId: 'putVolumeTemplateVersion',
      summary: 'Record a version of a volume template (the latest from now on)',
      tag: 'VolumeTemplate',
      requiresKind: 'VolumeTemplate',
      body: VolumeTemplateVersionInput,
      bodyOptional: true,
      response: VolumeTemplateVersion,
    },
    delete: {
      operationId: 'deleteVolumeTemplateVersion',
      summary: 'Delete one version of a volume template',
      tag: 'VolumeTemplate',
      requiresKind: 'VolumeTemplate',
      response: Type.Object({ message: Str(), template: ref('VolumeTemplate') }),
    },
  },
};
