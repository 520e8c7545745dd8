// The routes that are not generic CRUD (accounts, keys, tokens, workspaces, catalog, sub-resources,
// model gateway read-outs), described once for the OpenAPI document. Request bodies are the route
// modules' own schemas, imported; answer shapes are checked against the modules' view functions at
// compile time (`Same` below), so the table cannot drift from what is served.
import type { Static, TObject, TSchema } from '@sinclair/typebox';
import { Type } from '../kinds/typebox.js';
import type { ProviderModel } from '../models/list-models.js';
import type * as modelRoutes from '../models/routes.js';
import type { Role as RoleName } from '../kinds/types.js';
import { VolumeTemplateVersion as VersionSchema } from '../kinds/volume-template.js';
import { Template } from '../templates/schema.js';
import type { OAuthErrorCode } from './oauth.js';
import * as previewTokens from './preview-tokens.js';
import type * as quotas from './quotas.js';
import * as schedules from './sandbox-schedules.js';
import * as serviceAccounts from './service-accounts.js';
import * as versions from './volume-template-versions.js';
import * as workspaces from './workspaces.js';

export interface ExtraOperation {
  operationId: string;
  summary: string;
  /** Tag grouping the operation (a kind name, or a topic such as `ServiceAccount`). */
  tag: string;
  body?: TSchema;
  /** Media type of a body that is not JSON (an archive), sent as bytes. */
  bodyType?: string;
  bodyOptional?: boolean;
  /** The body may also be sent form-encoded (the OAuth token endpoint). */
  formBody?: boolean;
  query?: Record<string, TSchema>;
  /** Schemas of path parameters the route checks (default: any string). */
  params?: Record<string, TSchema>;
  /** A list served by api/pagination.ts: limit, cursor and labels, next-page headers. */
  paged?: boolean;
  /**
   * The response (an array) is answered through api-version.ts: a bare array, or `{data, meta}` for a caller
   * sending Blaxel-Version 2026-04-28 or later. Documented as both (openapi.ts `listSchema`).
   */
  versioned?: boolean;
  response?: TSchema;
  responseType?: string;
  responseDescription?: string;
  /** Success status; 200 unless said. */
  status?: number;
  /** Answers without a credential. */
  public?: boolean;
  /**
   * The least role in the addressed workspace the operation needs (published as `x-berth-role`); default viewer
   * for GET and member otherwise. `none`: it acts in no workspace of the caller's (creating one, the caller's own
   * invitations), so no role is asked.
   */
  role?: RoleName | 'none';
  /** Error body when it is not a problem (the OAuth endpoint answers RFC 6749 errors). */
  errorBody?: TSchema;
  /** Documented only when a kind of this name is served (sub-resources of kinds that land later). */
  requiresKind?: string;
}

export type ExtraPaths = Record<string, Partial<Record<'get' | 'post' | 'put' | 'delete', ExtraOperation>>>;

const opt = Type.Optional;
const Str = Type.String;
const Int = Type.Integer;
const ref = (id: string) => Type.Unsafe<unknown>({ $ref: id });

/**
 * A route module's schema, named `$id` so the document lists it once under components, with
 * descriptions added to some of its fields (keys the schema does not have do not compile).
 */
function named<T extends TObject>(
  schema: T,
  $id: string,
  fields: Partial<Record<keyof T['properties'], string>> = {},
): T {
  const properties: Record<string, TSchema> = { ...schema.properties };
  for (const [k, description] of Object.entries(fields) as [string, string][])
    properties[k] = { ...properties[k], description };
  return { ...schema, properties, $id };
}

/** All keys of every branch of a union. */
type KeysOf<T> = T extends unknown ? keyof T : never;
/** `T` with the fields that may hold `undefined` made optional, as a schema's optional fields are. */
type Loose<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as undefined extends T[K] ? K : never]?: T[K];
};
/** `true` when what a route answers (`T`) has exactly the fields schema `S` documents, of its types. */
type Same<S extends TSchema, T> = [T] extends [Static<S>]
  ? [Static<S>] extends [Loose<T>]
    ? [Exclude<KeysOf<T>, keyof Static<S>> | Exclude<keyof Static<S>, KeysOf<T>>] extends [never]
      ? true
      : false
    : false
  : false;

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
const ServiceAccountInput = named(serviceAccounts.CreateBody, 'ServiceAccountInput', {
  role: 'role in the workspace (default member)',
});
const ServiceAccountUpdate = named(serviceAccounts.UpdateBody, 'ServiceAccountUpdate');

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
const ApiKeyInput = named(serviceAccounts.KeyBody, 'ApiKeyInput', {
  expires_in: 'duration such as 30d, 24h, 1w; absent = never expires',
});

// The token endpoint parses its body by hand (JSON or form), so this schema is the documentation only.
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
    expires_in: Int({ description: 'seconds' }),
  },
  { $id: 'TokenResponse' },
);
const OAUTH_ERRORS = [
  'invalid_request',
  'invalid_client',
  'unsupported_grant_type',
  'server_error',
] as const satisfies readonly OAuthErrorCode[];
const OAuthError = Type.Object(
  { error: Type.Union(OAUTH_ERRORS.map((e) => Type.Literal(e))), error_description: Str() },
  { $id: 'OAuthError', description: 'RFC 6749 error' },
);

const Stamps = { createdAt: Str(), updatedAt: Str(), createdBy: Str(), updatedBy: Str() };
const Workspace = Type.Object({ name: Str(), displayName: opt(Str()), ...Stamps }, { $id: 'Workspace' });
const WorkspaceInput = named(workspaces.CreateBody, 'WorkspaceInput');
const WorkspaceUpdate = named(workspaces.UpdateBody, 'WorkspaceUpdate', {
  name: 'must equal the name in the path',
  displayName: 'replaces the display name; absent clears it',
});
const Member = Type.Object({ subject: Str(), subType: SubType, role: Role, ...Stamps }, { $id: 'Member' });
const MemberInput = named(workspaces.NewMemberBody, 'MemberInput', { subject: 'service account client ID' });
const MemberRole = named(workspaces.MemberBody, 'MemberRole');
const Invitation = Type.Object(
  {
    workspace: Str(),
    subject: Str(),
    subType: SubType,
    role: Role,
    status: Type.Literal('PENDING'),
    ...Stamps,
  },
  { $id: 'Invitation' },
);

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
const PreviewTokenInput = named(previewTokens.CreateBody, 'PreviewTokenInput', {
  metadata: 'metadata.name defaults to a generated name',
});

const VolumeTemplateVersion = named(VersionSchema, 'VolumeTemplateVersion');
const VolumeTemplateVersionInput = named(versions.VersionBody, 'VolumeTemplateVersionInput', {
  region: 'default: the first region served',
});
const VersionName = Str({ pattern: versions.VERSION_NAME.source });

const ProviderModelSchema = Type.Object(
  { id: Str(), displayName: opt(Str()), ownedBy: opt(Str()), createdAt: opt(Str()) },
  { $id: 'ProviderModel', description: "one model of the connection's provider" },
);
const UsageTotals = {
  inputTokens: Int(),
  outputTokens: Int(),
  totalTokens: Int(),
  requests: Int(),
  errors: Int(),
  avgLatencyMs: Int(),
};
const Totals = Type.Object(UsageTotals);
const ModelUsage = Type.Object(
  {
    hour: opt(Str({ description: 'start of the hour, ISO 8601 (groupBy=hour)' })),
    keyId: opt(Str({ description: 'the API key the calls used (groupBy=key)' })),
    ...UsageTotals,
  },
  { $id: 'ModelUsage', description: 'calls to a model in one hour, or by one key, ordered by that' },
);
const TimeQuery = (what: string) =>
  Str({ description: `${what}: an ISO 8601 time, or a duration ago such as 24h` });
const TokenLimits = Type.Object({ input: opt(Int()), output: opt(Int()), total: opt(Int()) });
const TokenAmount = Type.Object({ input: Int(), output: Int(), total: Int() });
const PolicyWindow = Type.Object(
  {
    policy: Str(),
    granularity: Type.Union((['minute', 'hour', 'day', 'month'] as const).map((g) => Type.Literal(g))),
    step: Int({ description: 'window length in granularity units' }),
    start: Str({ format: 'date-time' }),
    end: Str({ format: 'date-time' }),
    limits: TokenLimits,
    used: TokenAmount,
    reserved: { ...TokenAmount, description: 'held by calls still running' },
    remaining: TokenLimits,
  },
  { $id: 'PolicyWindow', description: "a maxToken policy's current window" },
);

const QuotaLine = {
  limit: Type.Union([Int(), Type.Null()], { description: 'null: no bound' }),
  used: Int(),
  unit: opt(Type.Literal('MB')),
  setting: Str({ description: "the server setting that sets the limit (the server's operator changes it)" }),
};
const QuotaLineSchema = Type.Object(QuotaLine);
const Quotas = Type.Object(
  {
    workspace: Str(),
    quotas: Type.Object({
      memory: Type.Object({
        ...QuotaLine,
        usedBy: Type.Object(
          { sandboxes: Int(), replicas: Int(), builds: Int(), jobTasks: Int() },
          {
            description:
              'MB held by sandboxes (until TERMINATED) and by the replicas, builds and job tasks running',
          },
        ),
      }),
      sandboxes: QuotaLineSchema,
      replicas: QuotaLineSchema,
      builds: QuotaLineSchema,
      jobTasks: QuotaLineSchema,
      volumes: QuotaLineSchema,
      images: QuotaLineSchema,
    }),
  },
  {
    $id: 'Quotas',
    description:
      "the workspace's quotas: what each allows and uses now; beyond one, a create is refused with 429 QUOTA_EXCEEDED naming it, and a replica, build or job task waits",
  },
);

// Compile-time: each answer schema has exactly the fields the route module's view returns.
type Fields<T, K extends PropertyKey> = { [P in Exclude<keyof T, K>]: T[P] };
type SaView = ReturnType<typeof serviceAccounts.serviceAccountView>;
type KeyView = ReturnType<typeof serviceAccounts.apiKeyView>;
type WindowView = ReturnType<typeof modelRoutes.windowView>;
const _answers: [
  Same<typeof ServiceAccount, Fields<SaView, 'client_secret'>>,
  Same<typeof ServiceAccountCreated, Fields<SaView, never> & { client_secret: string }>,
  Same<typeof ApiKey, Fields<KeyView, 'apiKey'>>,
  Same<typeof ApiKeyCreated, Fields<KeyView, never> & { apiKey: string }>,
  Same<typeof Workspace, ReturnType<typeof workspaces.workspaceView>>,
  Same<typeof Member, ReturnType<typeof workspaces.memberView>>,
  Same<typeof PreviewToken, ReturnType<typeof previewTokens.view>>,
  Same<typeof ProviderModelSchema, ProviderModel>,
  Same<typeof Totals, ReturnType<typeof modelRoutes.totals>>,
  Same<typeof PolicyWindow, WindowView>,
  Same<typeof TokenLimits, WindowView['remaining']>,
  Same<typeof OAuthError, { error: OAuthErrorCode; error_description: string }>,
  Same<typeof Quotas, quotas.QuotasView>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true];

const SA = 'ServiceAccount';
const SA_KEYS = '/service_accounts/{clientId}/api_keys';
const TOKENS = '/sandboxes/{sandboxName}/previews/{previewName}/tokens';
const VERSIONS = '/volume_templates/{volumeTemplateName}/versions';
const SCHEDULES = '/sandboxes/{sandboxName}/schedules';

/** A sandbox schedule as answered (api/sandbox-schedules.ts scheduleView). */
const ScheduleEntry = Type.Object(
  {
    id: Str(),
    type: Type.Union([Type.Literal('cron'), Type.Literal('at')]),
    value: Str(),
    input: schedules.ScheduleInput,
    maxExecutions: Int(),
    sandbox: Str(),
    createdAt: Str(),
    updatedAt: Str(),
    nextAt: opt(Str({ description: 'next firing (an `at` schedule is removed once it fired)' })),
    lastRunAt: opt(Str()),
  },
  { $id: 'SandboxSchedule' },
);
const ScheduleExecution = Type.Object(
  {
    id: Str(),
    scheduleId: Str(),
    sandbox: Str(),
    executedAt: Str(),
    createdAt: Str(),
    status: Type.Union([Type.Literal('succeeded'), Type.Literal('failed')]),
    statusCode: Int({ description: 'HTTP status of the process start; 0 when the sandbox was not reached' }),
    processName: Str(),
    timeout: Int(),
    error: opt(Str()),
  },
  { $id: 'SandboxScheduleExecution' },
);
const ScheduleBody = named(schedules.ScheduleBody, 'SandboxScheduleInput', {
  type: '`sleep` (a duration) is resolved to an `at` on create',
});

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
      role: 'admin',
      summary: 'List service accounts',
      tag: SA,
      versioned: true,
      response: Type.Array(ServiceAccount),
    },
    post: {
      operationId: 'createServiceAccount',
      role: 'admin',
      summary: 'Create a service account (the client secret is shown once)',
      tag: SA,
      body: ServiceAccountInput,
      response: ServiceAccountCreated,
    },
  },
  '/service_accounts/{clientId}': {
    get: {
      operationId: 'getServiceAccount',
      role: 'admin',
      summary: 'Get a service account',
      tag: SA,
      response: ServiceAccount,
    },
    put: {
      operationId: 'updateServiceAccount',
      role: 'admin',
      summary: 'Change name or description of a service account',
      tag: SA,
      body: ServiceAccountUpdate,
      response: ServiceAccount,
    },
    delete: {
      operationId: 'deleteServiceAccount',
      role: 'admin',
      summary: 'Delete a service account and its keys',
      tag: SA,
      response: ServiceAccount,
    },
  },
  [SA_KEYS]: {
    get: {
      operationId: 'listApiKeys',
      role: 'admin',
      summary: 'List the API keys of a service account',
      tag: SA,
      versioned: true,
      response: Type.Array(ApiKey),
    },
    post: {
      operationId: 'createApiKey',
      role: 'admin',
      summary: 'Create an API key (the key is shown once)',
      tag: SA,
      body: ApiKeyInput,
      bodyOptional: true,
      response: ApiKeyCreated,
    },
  },
  [`${SA_KEYS}/{apiKeyId}`]: {
    delete: {
      operationId: 'deleteApiKey',
      role: 'admin',
      summary: 'Revoke an API key',
      tag: SA,
      response: ApiKey,
    },
  },
  '/workspaces': {
    get: {
      operationId: 'listWorkspaces',
      role: 'none',
      summary: 'Workspaces the caller belongs to',
      tag: 'Workspace',
      versioned: true,
      response: Type.Array(Workspace),
    },
    post: {
      operationId: 'createWorkspace',
      role: 'none',
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
      role: 'admin',
      summary: 'Change the display name of a workspace (it cannot be renamed)',
      tag: 'Workspace',
      body: WorkspaceUpdate,
      response: Workspace,
    },
    delete: {
      operationId: 'deleteWorkspace',
      role: 'admin',
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
      versioned: true,
      response: Type.Array(Member),
    },
    post: {
      operationId: 'addMember',
      role: 'admin',
      summary:
        'Add a member or change its role (the subject in the body); a principal of another tenant is invited instead (202, an Invitation)',
      tag: 'Workspace',
      body: MemberInput,
      response: Member,
    },
  },
  '/workspaces/{workspaceName}/members/{subject}': {
    put: {
      operationId: 'setMemberRole',
      role: 'admin',
      summary:
        'Add a member or change its role (the subject in the path); a principal of another tenant is invited instead (202, an Invitation)',
      tag: 'Workspace',
      body: MemberRole,
      response: Member,
    },
    delete: {
      operationId: 'removeMember',
      role: 'admin',
      summary: 'Remove a member',
      tag: 'Workspace',
      response: Member,
    },
  },
  '/workspaces/{workspaceName}/invitations': {
    get: {
      operationId: 'listWorkspaceInvitations',
      role: 'admin',
      summary: 'Pending invitations of a workspace (admin)',
      tag: 'Workspace',
      versioned: true,
      response: Type.Array(Invitation),
    },
  },
  '/workspaces/{workspaceName}/invitations/{subject}': {
    delete: {
      operationId: 'deleteInvitation',
      role: 'none',
      summary: 'Withdraw (workspace admin) or decline (invitee) an invitation',
      tag: 'Workspace',
      response: Invitation,
    },
  },
  '/workspaces/{workspaceName}/invitations/{subject}/accept': {
    post: {
      operationId: 'acceptInvitation',
      role: 'none',
      summary: 'Accept an invitation: the invitee (or an admin of its home workspace) becomes a member',
      tag: 'Workspace',
      response: Member,
    },
  },
  '/quotas': {
    get: {
      operationId: 'getQuotas',
      summary: 'The quotas of the workspace the request acts in: each limit and its use now',
      tag: 'Workspace',
      response: Quotas,
    },
  },
  '/workspaces/{workspaceName}/quotas': {
    get: {
      operationId: 'getWorkspaceQuotas',
      summary: 'The quotas of a workspace (any member): each limit and its use now',
      tag: 'Workspace',
      response: Quotas,
    },
  },
  '/invitations': {
    get: {
      operationId: 'listMyInvitations',
      role: 'none',
      summary:
        'Pending invitations addressed to the caller (or to ?subject= for an admin of its home workspace)',
      tag: 'Workspace',
      query: {
        subject: Str({ description: 'a service account the caller administers (default: the caller)' }),
      },
      versioned: true,
      response: Type.Array(Invitation),
    },
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
      summary: 'Revoke a preview token, named by its name or by its value',
      tag: 'PreviewToken',
      requiresKind: 'Preview',
      response: PreviewToken,
    },
  },
  [SCHEDULES]: {
    get: {
      operationId: 'listSandboxSchedules',
      summary: 'Schedules of a sandbox',
      tag: 'SandboxSchedule',
      requiresKind: 'Sandbox',
      paged: true,
      query: {
        type: Type.Union([Type.Literal('cron'), Type.Literal('at')], {
          description: 'only this timing type',
        }),
      },
      versioned: true,
      response: Type.Array(ScheduleEntry),
    },
    post: {
      operationId: 'createSandboxSchedule',
      summary: 'Create a schedule: a command run in the sandbox at set times',
      tag: 'SandboxSchedule',
      requiresKind: 'Sandbox',
      body: ScheduleBody,
      response: ScheduleEntry,
    },
  },
  [`${SCHEDULES}/{scheduleId}`]: {
    get: {
      operationId: 'getSandboxSchedule',
      summary: 'Get a schedule',
      tag: 'SandboxSchedule',
      requiresKind: 'Sandbox',
      response: ScheduleEntry,
    },
    put: {
      operationId: 'updateSandboxSchedule',
      summary: 'Replace a schedule',
      tag: 'SandboxSchedule',
      requiresKind: 'Sandbox',
      body: ScheduleBody,
      response: ScheduleEntry,
    },
    delete: {
      operationId: 'deleteSandboxSchedule',
      summary: 'Delete a schedule',
      tag: 'SandboxSchedule',
      requiresKind: 'Sandbox',
      response: ScheduleEntry,
    },
  },
  '/sandboxes/{sandboxName}/schedule-executions': {
    get: {
      operationId: 'listSandboxScheduleExecutions',
      summary: "Firings of a sandbox's schedules, newest first",
      tag: 'SandboxSchedule',
      requiresKind: 'Sandbox',
      paged: true,
      versioned: true,
      response: Type.Array(ScheduleExecution),
    },
  },
  [VERSIONS]: {
    get: {
      operationId: 'listVolumeTemplateVersions',
      summary: 'Versions of a volume template',
      tag: 'VolumeTemplate',
      requiresKind: 'VolumeTemplate',
      versioned: true,
      response: Type.Array(VolumeTemplateVersion),
    },
  },
  [`${VERSIONS}/{versionName}`]: {
    put: {
      operationId: 'putVolumeTemplateVersion',
      summary: 'Record a version of a volume template (the latest from now on)',
      tag: 'VolumeTemplate',
      requiresKind: 'VolumeTemplate',
      params: { versionName: VersionName },
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
  '/integrations/connections/{connectionName}/models': {
    get: {
      operationId: 'listConnectionModels',
      summary: "Models the connection's provider offers (asked of the provider now)",
      tag: 'IntegrationConnection',
      requiresKind: 'IntegrationConnection',
      response: Type.Array(ProviderModelSchema),
    },
  },
  '/models/{modelName}/usage': {
    get: {
      operationId: 'getModelUsage',
      summary: 'Token usage of a model endpoint, by hour or by API key',
      tag: 'Model',
      requiresKind: 'Model',
      query: {
        from: TimeQuery('start (default: 24h ago)'),
        to: TimeQuery('end (default: now)'),
        groupBy: Type.Union([Type.Literal('hour'), Type.Literal('key')], {
          default: 'hour',
          description: 'one row per hour, or per API key',
        }),
      },
      response: Type.Array(ModelUsage),
    },
  },
  '/egressgateways/usage': {
    get: {
      operationId: 'getEgressGatewaysUsage',
      summary: "Which of the workspace's sandboxes use which egress gateway: gateway name → sandbox names",
      tag: 'EgressGateway',
      requiresKind: 'EgressGateway',
      response: Type.Record(Type.String(), Type.Array(Type.String())),
    },
  },
  '/policies/{policyName}/usages': {
    get: {
      operationId: 'getPolicyUsages',
      summary: 'Current token consumption of a maxToken policy, per window (empty for other policies)',
      tag: 'Policy',
      requiresKind: 'Policy',
      response: Type.Array(PolicyWindow),
    },
  },
};
