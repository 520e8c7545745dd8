// The routes of workloads' code, builds, logs and executions and of drives' S3 stand-ins, described for the OpenAPI
// document beside openapi-extra.ts (the image store's are in openapi-images.ts). Route params are named as the kinds
// name them (`{agentName}`, `{jobId}`), whatever the route module calls them.
import { Type } from '../kinds/typebox.js';
import type { ExtraOperation, ExtraPaths } from './openapi-extra.js';
import { CODE_KINDS } from './code-upload.js';

const opt = Type.Optional;
const Str = Type.String;
const Int = Type.Integer;
const TEXT = 'text/plain; charset=utf-8';
const follow = {
  follow: Type.Boolean({ description: 'stream the log as it is written, until it ends' }),
};

/** Path parameter names of the kinds that take code (as kinds/*.ts name them). */
const NAME_PARAM = { agents: 'agentName', functions: 'functionName', jobs: 'jobId' } as const;
const KIND_OF = CODE_KINDS;

const Revision = Type.Object(
  {
    id: Str(),
    active: Type.Boolean({ description: 'the revision that serves now' }),
  },
  { $id: 'Revision', additionalProperties: true, description: 'one built revision, newest last' },
);

const ExecutionInput = Type.Object(
  {
    tasks: opt(Type.Array(Type.Unknown(), { description: "each task's input (default: one empty task)" })),
    env: opt(Type.Record(Str(), Str(), { description: 'environment added to every task' })),
    memory: opt(Int({ minimum: 64, maximum: 65_536, description: "MB, instead of the job's own" })),
    executionId: opt(
      Str({
        pattern: '^[a-zA-Z0-9][a-zA-Z0-9-]{0,62}$',
        description: 'idempotency: the same id is the same run',
      }),
    ),
  },
  { $id: 'JobExecutionInput' },
);
const ExecutionCreated = Type.Object({
  executionId: Str(),
  id: Str(),
  jobId: Str(),
  workspaceId: Str(),
  tasks: Type.Array(Type.Unknown()),
});
const Execution = Type.Object(
  {
    metadata: Type.Object({ id: Str(), job: Str(), workspace: Str() }, { additionalProperties: true }),
    status: Str(),
    tasks: Type.Array(Type.Unknown()),
  },
  { $id: 'JobExecution', additionalProperties: true },
);
const Task = Type.Object({ index: Int(), status: Str() }, { $id: 'JobTask', additionalProperties: true });

const SourceUploaded = Type.Object({ digest: Str(), size: Int(), alreadyPresent: Type.Boolean() });

function codePaths(): ExtraPaths {
  const out: ExtraPaths = {};
  for (const [plural, kind] of Object.entries(KIND_OF)) {
    const item = `/${plural}/{${NAME_PARAM[plural as keyof typeof NAME_PARAM]}}`;
    const base: Pick<ExtraOperation, 'tag' | 'requiresKind'> = { tag: kind, requiresKind: kind };
    out[`${item}/code`] = {
      put: {
        ...base,
        operationId: `upload${kind}Code`,
        summary: `Upload the source of ${kind === 'Agent' ? 'an' : 'a'} ${kind.toLowerCase()} (a zip); it is built and deployed`,
        body: Type.String({ format: 'binary' }),
        bodyType: 'application/zip',
        response: SourceUploaded,
      },
    };
    out[`${item}/revisions`] = {
      get: {
        ...base,
        operationId: `list${kind}Revisions`,
        summary: `Built revisions of the ${kind.toLowerCase()}`,
        versioned: true,
        response: Type.Array(Revision),
      },
    };
    out[`${item}/revisions/{revisionId}/logs`] = {
      get: {
        ...base,
        operationId: `get${kind}BuildLog`,
        summary: 'The build log of a revision (`latest`: the build of the last uploaded source)',
        query: follow,
        response: Str(),
        responseType: TEXT,
      },
    };
    if (kind === 'Job') continue;
    out[`${item}/logs`] = {
      get: {
        ...base,
        operationId: `get${kind}Logs`,
        summary: "The running replicas' output, each line prefixed with its replica",
        query: follow,
        response: Str(),
        responseType: TEXT,
      },
    };
  }
  return out;
}

const JOB = { tag: 'Job', requiresKind: 'Job' } as const;
const EXEC = '/jobs/{jobId}/executions';

export const WORKLOAD_PATHS: ExtraPaths = {
  ...codePaths(),
  '/agents/{agentName}/executions/{executionId}': {
    get: {
      tag: 'Agent',
      requiresKind: 'Agent',
      operationId: 'getAgentExecution',
      summary:
        'An asynchronous invocation (`?async=true` on the agent address), while it runs and an hour after',
      response: Type.Object({}, { additionalProperties: true }),
    },
  },
  [EXEC]: {
    get: {
      ...JOB,
      operationId: 'listJobExecutions',
      summary: 'Executions of a job',
      paged: true,
      versioned: true,
      response: Type.Array(Execution),
    },
    post: {
      ...JOB,
      operationId: 'createJobExecution',
      summary: "Start an execution of the job's active revision",
      body: ExecutionInput,
      bodyOptional: true,
      response: ExecutionCreated,
    },
  },
  [`${EXEC}/{executionId}`]: {
    get: { ...JOB, operationId: 'getJobExecution', summary: 'An execution', response: Execution },
    delete: {
      ...JOB,
      operationId: 'cancelJobExecution',
      summary: 'Cancel an execution (its running tasks are stopped)',
      response: Execution,
    },
  },
  [`${EXEC}/{executionId}/tasks`]: {
    get: {
      ...JOB,
      operationId: 'listJobExecutionTasks',
      summary: 'Tasks of an execution',
      response: Type.Array(Task),
    },
  },
  [`${EXEC}/{executionId}/tasks/{taskIndex}/logs`]: {
    get: {
      ...JOB,
      operationId: 'getJobTaskLogs',
      summary: "A task's output",
      query: follow,
      response: Str(),
      responseType: TEXT,
    },
  },
  '/drives/{driveName}/access-token': {
    post: {
      tag: 'Drive',
      requiresKind: 'Drive',
      operationId: 'createDriveAccessToken',
      summary:
        'The service’s S3 token for a drive: Berth has no S3 endpoint, so this answers 501 (mount the drive)',
      status: 501,
    },
  },
  '/drives/jwks.json': {
    get: {
      tag: 'Drive',
      requiresKind: 'Drive',
      operationId: 'getDriveJwks',
      summary: 'The key set of drive tokens: none is ever issued, so this answers 501',
      public: true,
      status: 501,
    },
  },
};
