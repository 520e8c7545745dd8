// The routes of the service's SDK beyond Berth's own (decision 047), described for the OpenAPI document: workspace
// users, the server's catalogs, lists across parents, a model's revisions and a connection's model details. Answer
// shapes are checked against the route modules' views at compile time where a module builds them.
import { Type } from '../kinds/typebox.js';
import type { ChangelogEntry } from './catalogs.js';
import type { ExtraPaths } from './openapi-extra.js';
import type { modelRevisions } from './revisions.js';
import * as users from './workspace-users.js';

const opt = Type.Optional;
const Str = Type.String;
const Int = Type.Integer;
const Bool = Type.Boolean;
const ref = (id: string) => Type.Unsafe<unknown>({ $ref: id });
const StrMap = Type.Record(Str(), Str());
const Anything = Type.Record(Str(), Type.Unknown());

const WorkspaceUser = Type.Object(
  {
    sub: Str({ description: 'the principal: a service account client id' }),
    role: Str(),
    accepted: Bool({ description: 'false while an invitation waits for the invitee' }),
    expired: Bool({ description: 'always false: invitations wait until accepted, declined or withdrawn' }),
    source: Type.Literal('invitation'),
  },
  { $id: 'WorkspaceUser' },
);
const PendingInvitation = Type.Object(
  {
    email: Str({ description: 'the invited principal (Berth identities have no e-mail address)' }),
    workspace: Str(),
    role: Str(),
    invitedBy: Str(),
    createdAt: Str(),
    updatedAt: Str(),
    createdBy: Str(),
    updatedBy: Str(),
  },
  { $id: 'PendingInvitation' },
);
const Availability = Type.Object(
  {
    available: Bool(),
    reason: opt(Type.Literal('taken')),
    message: opt(Str()),
  },
  { $id: 'WorkspaceAvailability' },
);

const Category = Type.Object({ name: Str() });
const McpDefinition = Type.Object(
  {
    name: Str(),
    displayName: Str(),
    description: Str(),
    icon: Str(),
    url: Str({ description: 'where the template is, in the repository' }),
    categories: Type.Array(Category),
    transport: Type.Literal('http-stream'),
    hidden: Bool(),
    enterprise: Bool(),
    coming_soon: Bool(),
  },
  { $id: 'McpDefinition', description: 'an MCP server template of the catalog' },
);
const SandboxDefinition = Type.Object(
  {
    name: Str(),
    displayName: Str(),
    description: Str(),
    image: Str(),
    memory: Int({ description: 'MB' }),
    ports: Type.Array(Type.Object({ name: opt(Str()), target: Int(), protocol: opt(Str()) })),
    categories: Type.Array(Category),
    hidden: Bool(),
    enterprise: Bool(),
    coming_soon: Bool(),
  },
  { $id: 'SandboxDefinition', description: 'what a sandbox can start from without an image of its own' },
);
const Location = Type.Object(
  {
    region: Str(),
    location: Str(),
    status: Str(),
    flavors: Type.Array(Type.Object({ name: Str(), type: Type.Literal('cpu') })),
  },
  { $id: 'LocationResponse' },
);
const Configuration = Type.Object(
  {
    continents: Type.Array(Type.Object({ name: Str(), displayName: opt(Str()) })),
    countries: Type.Array(Type.Object({ name: Str(), displayName: opt(Str()) })),
    privateLocations: Type.Array(Type.Object({ name: Str() })),
    regions: Type.Array(
      Type.Object({
        name: Str(),
        location: Str(),
        drivesAvailable: Bool(),
        egressAvailable: Bool({ description: 'egress gateways are configured (BERTH_EGRESS_GATEWAYS)' }),
        proxyAvailable: Bool(),
      }),
    ),
  },
  { $id: 'Configuration', description: 'the regions this server serves' },
);
const PublicIps = Type.Record(
  Str(),
  Type.Object({ description: Str(), ipv4Cidrs: Type.Array(Str()), ipv6Cidrs: Type.Array(Str()) }),
  { $id: 'PublicIps', description: 'region → the addresses egress leaves from' },
);
const ChangelogSchema = Type.Object(
  {
    entries: Type.Array(
      Type.Object({
        date: Str({ description: 'YYYY-MM-DD' }),
        title: Str(),
        content: Str({ description: 'Markdown' }),
      }),
    ),
  },
  { $id: 'ChangelogResponse', description: "Berth's release notes (CHANGELOG.md), newest first" },
);
const IntegrationField = Type.Object({
  name: Str(),
  required: Bool(),
  description: Str(),
  default: opt(Str()),
});
const Integration = Type.Object(
  {
    name: Str(),
    additionalInfos: StrMap,
    endpoints: Type.Record(Str(), Type.Object({ method: Str(), path: opt(Str()) })),
    headers: StrMap,
    params: StrMap,
    organizations: Type.Array(Anything),
    repositories: Type.Array(Anything),
    config: Type.Array(IntegrationField, { description: 'spec.config fields the integration reads' }),
    secrets: Type.Array(IntegrationField, { description: 'spec.secret fields (stored encrypted)' }),
  },
  { $id: 'Integration', description: 'an integration kind Berth knows' },
);
const EndpointConfigurations = Type.Object(
  {
    integration: Str(),
    wire: Str({ description: "the provider's API format" }),
    baseUrl: Str(),
    endpoints: Type.Record(Str(), Type.Object({ method: Str(), path: Str(), url: Str() })),
  },
  {
    $id: 'EndpointConfigurations',
    description: "where the gateway sends a model's calls over the connection",
  },
);
const RevisionMetadata = Type.Object(
  {
    id: Str({ description: "the model's generation" }),
    active: Bool(),
    canary: Bool(),
    previousActive: Bool(),
    trafficPercent: Int(),
    status: Str(),
    createdAt: Str(),
    createdBy: Str(),
  },
  { $id: 'RevisionMetadata' },
);
const ScheduleMetrics = Type.Object(
  {
    since: Str({ description: 'window start, a UTC minute' }),
    until: Str({ description: 'window end (exclusive), a UTC minute' }),
    executions: Int(),
    executionsByStatus: Type.Object({ succeeded: Int(), failed: Int() }),
    sandboxes: Int({ description: 'sandboxes of the workspace not being deleted' }),
    schedules: Int(),
  },
  { $id: 'SandboxScheduleMetrics' },
);
const Feature = Type.Object(
  {
    featureKey: Str(),
    enabled: Bool(),
    variant: Type.Union([Type.Literal('on'), Type.Literal('off')]),
    evaluatedAt: Str(),
    payload: Type.Object({ description: Str() }),
  },
  { $id: 'FeatureFlag' },
);

const Sort = Type.Union([Type.Literal('createdAt:desc'), Type.Literal('createdAt:asc')], {
  description: 'by creation time; newest first by default',
});
const Page = {
  limit: Int({ minimum: 1, maximum: 1000, description: 'page size (default 100)' }),
  cursor: Str({ description: 'meta.nextCursor (or X-Next-Cursor) of the previous page' }),
  sort: Sort,
  q: Str({ description: 'substring (2 characters or more) of the id, sandbox, name or command' }),
  sandbox: Str({ description: 'only this sandbox' }),
};
const Time = (what: string) => Str({ description: `${what}, RFC 3339` });

// Compile-time: what the route modules answer has exactly the documented fields.
type Exactly<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Keys<T> = keyof T;
const _answers: [
  Exactly<Keys<ReturnType<typeof users.workspaceUserView>>, Keys<typeof WorkspaceUser.static>>,
  Exactly<Keys<ReturnType<typeof users.pendingInvitationView>>, Keys<typeof PendingInvitation.static>>,
  Exactly<Keys<ReturnType<typeof modelRevisions>[number]>, Keys<typeof RevisionMetadata.static>>,
  Exactly<Keys<ChangelogEntry>, Keys<(typeof ChangelogSchema.static)['entries'][number]>>,
] = [true, true, true, true];

const USERS = 'WorkspaceUser';
const CATALOG = 'Catalog';
const SCHEDULES = 'SandboxSchedule';

export const SERVICE_PATHS: ExtraPaths = {
  '/users': {
    get: {
      operationId: 'listWorkspaceUsers',
      summary: 'Members (accepted) and invitees (not yet) of the workspace the request acts in',
      tag: USERS,
      versioned: true,
      response: Type.Array(WorkspaceUser),
    },
    post: {
      operationId: 'inviteWorkspaceUser',
      role: 'admin',
      summary:
        'Invite a principal (its subject in `email`): it joins once it, or an admin of its home workspace, accepts',
      tag: USERS,
      body: users.InviteBody,
      response: PendingInvitation,
    },
  },
  '/users/{subOrEmail}': {
    put: {
      operationId: 'updateWorkspaceUserRole',
      role: 'admin',
      summary: "Change a member's role, or the role an invitation offers",
      tag: USERS,
      body: users.UserRoleBody,
      response: WorkspaceUser,
    },
    delete: {
      operationId: 'removeWorkspaceUser',
      role: 'admin',
      summary:
        'Remove a member (never the last admin, nor an account from its home) or withdraw an invitation',
      tag: USERS,
      response: WorkspaceUser,
    },
  },
  '/workspaces/{workspaceName}/leave': {
    delete: {
      operationId: 'leaveWorkspace',
      role: 'viewer',
      summary: 'The caller leaves the workspace (never its home workspace, nor as its last admin)',
      tag: 'Workspace',
      response: ref('Workspace'),
    },
  },
  '/workspaces/availability': {
    post: {
      operationId: 'checkWorkspaceAvailability',
      role: 'none',
      summary: 'Whether a workspace of this name can be created now',
      tag: 'Workspace',
      body: users.AvailabilityBody,
      query: {
        withReason: Bool({ description: 'answer {available, reason, message} instead of a boolean' }),
      },
      response: Type.Union([Bool(), Availability]),
    },
  },
  '/mcp/hub': {
    get: {
      operationId: 'listMcpHubDefinitions',
      summary: 'The MCP server templates of the catalog',
      tag: CATALOG,
      response: Type.Array(McpDefinition),
    },
  },
  '/sandbox/hub': {
    get: {
      operationId: 'listSandboxHubDefinitions',
      summary: 'What a sandbox can start from without an image of its own',
      tag: CATALOG,
      response: Type.Array(SandboxDefinition),
    },
  },
  '/locations': {
    get: {
      operationId: 'listLocations',
      summary: 'The regions this server serves',
      tag: CATALOG,
      response: Type.Array(Location),
    },
  },
  '/configuration': {
    get: {
      operationId: 'getConfiguration',
      summary: 'The regions this server serves and what each offers',
      tag: CATALOG,
      response: Configuration,
    },
  },
  '/publicIps': {
    get: {
      operationId: 'listPublicIps',
      summary: 'By region, the addresses egress gateways send from',
      tag: CATALOG,
      query: { region: Str({ description: 'only this served region' }) },
      response: PublicIps,
    },
  },
  '/features': {
    get: {
      operationId: 'getWorkspaceFeatures',
      summary: "This server's enabled features (the same in every workspace)",
      tag: CATALOG,
      response: Type.Object({ features: Type.Record(Str(), Type.Literal(true)) }),
    },
  },
  '/features/{featureKey}': {
    get: {
      operationId: 'testFeatureFlag',
      summary: 'One feature of this server, on or off (404 for a key it does not know)',
      tag: CATALOG,
      query: { account: Str({ description: 'refused: Berth has no accounts' }) },
      response: Feature,
    },
  },
  '/changelog': {
    get: {
      operationId: 'getChangelog',
      summary: "Berth's release notes, newest first",
      tag: CATALOG,
      response: ChangelogSchema,
    },
  },
  '/integrations/{integrationName}': {
    get: {
      operationId: 'getIntegration',
      summary: 'An integration kind Berth knows, with the config and secret fields it reads',
      tag: CATALOG,
      response: Integration,
    },
  },
  '/integrations/connections/{connectionName}/models/{modelId}': {
    get: {
      operationId: 'getConnectionModel',
      summary: "One model of the connection's provider (asked of the provider now)",
      tag: 'IntegrationConnection',
      requiresKind: 'IntegrationConnection',
      response: ref('ProviderModel'),
    },
  },
  '/integrations/connections/{connectionName}/endpointConfigurations': {
    get: {
      operationId: 'getConnectionEndpointConfigurations',
      summary: "Where the model gateway sends a model's calls over the connection",
      tag: 'IntegrationConnection',
      requiresKind: 'IntegrationConnection',
      response: EndpointConfigurations,
    },
  },
  '/applications/{applicationName}/revisions': {
    get: {
      operationId: 'listApplicationRevisions',
      summary: "An application's kept revisions, newest first (the service's AppRevision shape)",
      tag: 'Application',
      requiresKind: 'Application',
      response: Type.Array(
        Type.Object(
          {
            id: Type.String(),
            image: Type.String(),
            imageId: Type.String(),
            port: Type.Integer(),
            memory: Type.Integer(),
            createdAt: Type.String(),
            createdBy: Type.Optional(Type.String()),
            active: Type.Boolean(),
          },
          { $id: 'AppRevision' },
        ),
      ),
    },
  },
  '/models/{modelName}/revisions': {
    get: {
      operationId: 'listModelRevisions',
      summary: "A model endpoint's revision: its configuration now (Berth keeps no earlier one)",
      tag: 'Model',
      requiresKind: 'Model',
      versioned: true,
      response: Type.Array(RevisionMetadata),
    },
  },
  '/schedules': {
    get: {
      operationId: 'listSchedules',
      summary: 'Schedules of every sandbox of the workspace',
      tag: SCHEDULES,
      requiresKind: 'Sandbox',
      versioned: true,
      query: {
        ...Page,
        type: Type.Union([Type.Literal('cron'), Type.Literal('at')], {
          description: 'only this timing type',
        }),
      },
      response: Type.Array(ref('SandboxSchedule')),
    },
  },
  '/schedule-executions': {
    get: {
      operationId: 'listScheduleExecutions',
      summary: 'Firings of the schedules of every sandbox of the workspace',
      tag: SCHEDULES,
      requiresKind: 'Sandbox',
      versioned: true,
      query: {
        ...Page,
        status: Type.Union([Type.Literal('succeeded'), Type.Literal('failed')], {
          description: 'whether the sandbox accepted the command',
        }),
        schedule: Str({ description: 'only this schedule id' }),
        since: Time('created at or after'),
        until: Time('created at or before'),
      },
      response: Type.Array(ref('SandboxScheduleExecution')),
    },
  },
  '/schedules/metrics': {
    get: {
      operationId: 'getSandboxScheduleMetrics',
      summary: "Counts of the workspace's schedules and of their firings in a window (at most 7 days back)",
      tag: SCHEDULES,
      requiresKind: 'Sandbox',
      query: {
        since: Time('window start (default: a day before until)'),
        until: Time('window end (default: now)'),
      },
      response: ScheduleMetrics,
    },
  },
};
