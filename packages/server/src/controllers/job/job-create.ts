// Starting an execution, for the API (POST /jobs/{job}/executions) and for the job's schedules alike: checks the
// request, pins the job's active revision, and writes the execution with all its tasks in one transaction. An
// `executionId` sent again with the same request is the same execution (idempotent); with another, a 409.
import { ApiError } from '../../errors.js';
import type { Resources } from '../../store/resources.js';
import { StoreError, type StoredObject } from '../../store/store.js';
import type { JobRunner } from './job-runner.js';
import { failedByPolicy } from '../code/workload-policies.js';
import { quotaExceeded, taskMemoryRefusal } from '../core/quotas.js';
import {
  type ExecutionRecord,
  execKey,
  newExecutionId,
  requestDigest,
  type TaskRecord,
  taskKey,
} from './job-store.js';

/** Tasks per execution: each is a stored object and a sandbox; bigger batches belong in several executions. */
export const MAX_TASKS = 10_000;
/** A task's input travels in its sandbox's environment (BL_EXECUTION_DATA_URL), which caps one variable at 128 KiB. */
export const MAX_TASK_INPUT_BYTES = 64 * 1024;
const ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/i;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Memory override bounds (MB), as the job's own runtime.memory. */
const MIN_MEMORY_MB = 64;
const MAX_MEMORY_MB = 65_536;

const bad = (pointer: string, message: string) =>
  new ApiError('VALIDATION_FAILED', message, { errors: [{ pointer, message }] });

export interface CreateDeps {
  resources: Resources;
  runner: JobRunner;
  now: () => number;
}

export async function createExecution(
  deps: CreateDeps,
  workspace: string,
  j: StoredObject,
  raw: unknown,
): Promise<{ id: string; tasks: unknown[] }> {
  const { runner, now } = deps;
  const store = deps.resources.store;
  const job = j.name;
  const body = (raw ?? {}) as Record<string, any>;
  if (typeof body !== 'object' || Array.isArray(body))
    throw new ApiError('MALFORMED_REQUEST', 'the body must be a JSON object');
  const tasks: unknown[] =
    body.tasks === undefined || (Array.isArray(body.tasks) && !body.tasks.length) ? [{}] : body.tasks;
  if (!Array.isArray(tasks)) throw bad('/tasks', 'tasks must be an array of task inputs');
  if (tasks.length > MAX_TASKS) throw bad('/tasks', `at most ${MAX_TASKS} tasks per execution`);
  tasks.forEach((t, i) => {
    if (JSON.stringify(t ?? {}).length > MAX_TASK_INPUT_BYTES)
      throw bad(`/tasks/${i}`, `a task's input is at most ${MAX_TASK_INPUT_BYTES} bytes of JSON`);
  });
  if (body.env !== undefined) {
    if (!body.env || typeof body.env !== 'object' || Array.isArray(body.env))
      throw bad('/env', 'env must be an object of strings');
    for (const [k, v] of Object.entries(body.env)) {
      if (!ENV_NAME.test(k))
        throw bad(`/env/${k}`, `${JSON.stringify(k)} is not an environment variable name`);
      if (typeof v !== 'string') throw bad(`/env/${k}`, 'env values must be strings');
    }
  }
  if (
    body.memory !== undefined &&
    (!Number.isInteger(body.memory) || body.memory < MIN_MEMORY_MB || body.memory > MAX_MEMORY_MB)
  )
    throw bad('/memory', `memory must be an integer number of MB from ${MIN_MEMORY_MB} to ${MAX_MEMORY_MB}`);
  const given = body.executionId ?? body.id;
  if (given !== undefined && (typeof given !== 'string' || !ID_PATTERN.test(given)))
    throw bad(
      '/executionId',
      'executionId must be 1-63 letters, digits or dashes, starting with a letter or digit',
    );
  if (j.body.spec?.enabled === false)
    throw new ApiError('INVALID_STATE', `job ${JSON.stringify(job)} is disabled`);
  if (failedByPolicy(j.body))
    throw new ApiError(
      'INVALID_STATE',
      `job ${JSON.stringify(job)} may not run: ${j.body.events.at(-1).message}`,
    );
  const revId: string | undefined = j.body.activeRevision;
  const revision = (j.body.revisions ?? []).find((r: { id: string }) => r.id === revId);
  if (!revision)
    throw new ApiError(
      'INVALID_STATE',
      `job ${JSON.stringify(job)} has no deployed revision yet (status ${j.body.status ?? 'none'}): deploy its code first (berth deploy --kind job)`,
    );
  const digest = requestDigest({ tasks, env: body.env, memory: body.memory });
  const id = given ?? newExecutionId(now());
  const existing = await store.get(execKey(workspace, job, id));
  if (existing) {
    if ((existing.body as ExecutionRecord).requestDigest !== digest)
      throw new ApiError(
        'ALREADY_EXISTS',
        `execution ${JSON.stringify(id)} exists with other tasks or settings`,
      );
    return { id, tasks };
  }
  const rt = j.body.spec?.runtime ?? {};
  const memoryMb: number = body.memory ?? rt.memory ?? 1024;
  // A task that can never fit the workspace's memory quota is refused now; one that only has to wait is queued.
  const q = runner.quota;
  const tooBig =
    q &&
    taskMemoryRefusal(
      workspace,
      q.limits(workspace),
      memoryMb,
      body.memory !== undefined ? 'the memory of the request' : "the job's spec.runtime.memory",
    );
  if (tooBig)
    throw quotaExceeded(
      tooBig,
      body.memory !== undefined ? [{ pointer: '/memory', message: 'exceeds the memory quota' }] : undefined,
    );
  const at = new Date(now()).toISOString();
  const rec: ExecutionRecord = {
    id,
    job,
    status: 'pending',
    createdAt: at,
    updatedAt: at,
    revision: revision.id,
    app: revision.app,
    memoryMb,
    maxConcurrentTasks: rt.maxConcurrentTasks ?? 1,
    maxRetries: rt.maxRetries ?? 0,
    timeoutS: rt.timeout ?? 900,
    total: tasks.length,
    envOverride: body.env,
    memoryOverride: body.memory,
    requestDigest: digest,
  };
  let created: StoredObject;
  try {
    [created] = await store.write([
      { op: 'create', key: execKey(workspace, job, id), body: rec },
      ...tasks.map((input, index) => ({
        op: 'create' as const,
        key: taskKey(workspace, job, id, index),
        body: { index, input: input ?? {}, status: 'pending', attempts: 0 } satisfies TaskRecord,
      })),
    ]);
  } catch (err) {
    if (err instanceof StoreError && err.reason === 'exists')
      throw new ApiError('ALREADY_EXISTS', `execution ${JSON.stringify(id)} was created at the same time`);
    throw err;
  }
  await runner.track(created);
  return { id, tasks };
}
