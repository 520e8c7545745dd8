// Executions of a job in the SDK's shapes (`@blaxel/core` createJobExecution, getJobExecution, listJobExecutions,
// deleteJobExecution): POST/GET /jobs/{job}/executions, GET/DELETE .../executions/{id}, GET .../{id}/tasks and each
// task's log (GET .../{id}/tasks/{index}/logs). An execution runs the job's revision active when it was created.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { readFileSync } from 'node:fs';
import { requireRole } from '../auth/require-role.js';
import { ApiError } from '../errors.js';
import type { JobRunner } from '../controllers/job-runner.js';
import { countTasks, type TaskStatus } from '../controllers/job-decide.js';
import {
  EXECUTION_KIND,
  type ExecutionRecord,
  execKey,
  newExecutionId,
  requestDigest,
  TASK_KIND,
  type TaskRecord,
  taskKey,
  tasksParent,
} from '../controllers/job-store.js';
import type { Resources } from '../store/resources.js';
import { StoreError, type StoredObject } from '../store/store.js';
import { listPage } from './pagination.js';

/** Tasks per execution: each is a stored object and a sandbox; bigger batches belong in several executions. */
export const MAX_TASKS = 10_000;
/** A task's input travels in its sandbox's environment (BL_EXECUTION_DATA_URL), which caps one variable at 128 KiB. */
export const MAX_TASK_INPUT_BYTES = 64 * 1024;
const ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/i;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Memory override bounds (MB), as the job's own runtime.memory. */
const MIN_MEMORY_MB = 64;
const MAX_MEMORY_MB = 65_536;

export interface JobExecutionRouteDeps {
  resources: Resources;
  runner: JobRunner;
  now?: () => number;
}

const bad = (pointer: string, message: string) =>
  new ApiError('VALIDATION_FAILED', message, { errors: [{ pointer, message }] });

function taskWire(t: TaskRecord, rec: ExecutionRecord) {
  return {
    metadata: {
      name: String(t.index),
      createdAt: rec.createdAt,
      startedAt: t.startedAt,
      completedAt: t.completedAt,
      updatedAt: t.updatedAt,
      scheduledAt: t.notBefore,
    },
    spec: { maxRetries: rec.maxRetries, timeout: `${rec.timeoutS}s` },
    status: t.status,
    conditions: t.conditions ?? [],
    index: t.index,
    attempts: t.attempts,
    exitCode: t.exitCode,
  };
}

function executionWire(workspace: string, rec: ExecutionRecord, tasks: TaskRecord[]) {
  const c = countTasks(tasks.map((t) => t.status as TaskStatus));
  return {
    metadata: {
      id: rec.id,
      job: rec.job,
      workspace,
      createdAt: rec.createdAt,
      startedAt: rec.startedAt,
      completedAt: rec.completedAt,
      updatedAt: rec.updatedAt,
    },
    spec: {
      parallelism: rec.maxConcurrentTasks,
      timeout: rec.timeoutS,
      memoryOverride: rec.memoryOverride,
      // Names only: values can be secrets.
      envOverride: rec.envOverride
        ? Object.fromEntries(Object.keys(rec.envOverride).map((k) => [k, '***']))
        : undefined,
      tasks: tasks.map((t) => ({ index: t.index })),
    },
    status: rec.status,
    stats: {
      total: rec.total,
      success: c.succeeded,
      failure: c.failed + c.timeout,
      timeout: c.timeout,
      running: c.running,
      pending: c.pending,
      cancelled: c.cancelled,
      retried: tasks.reduce((n, t) => n + Math.max(0, t.attempts - 1 - (t.lost ?? 0)), 0),
    },
    tasks: tasks.map((t) => taskWire(t, rec)),
    revision: rec.revision,
  };
}

export function registerJobExecutionRoutes(app: FastifyInstance, deps: JobExecutionRouteDeps) {
  const { resources, runner } = deps;
  const now = deps.now ?? Date.now;
  const store = resources.store;
  const jobKind = resources.kind('Job');

  const tasksOf = async (workspace: string, job: string, id: string) =>
    (await store.list({ kind: TASK_KIND, workspace, parent: tasksParent(job, id) })).map(
      (o) => o.body as TaskRecord,
    );

  async function execution(req: FastifyRequest) {
    const a = requireRole(req, 'viewer');
    const { job, id } = req.params as { job: string; id: string };
    await resources.mustGet(jobKind, a.workspace, [], job);
    const o = await store.get(execKey(a.workspace, job, id));
    if (!o)
      throw new ApiError('NOT_FOUND', `job ${JSON.stringify(job)} has no execution ${JSON.stringify(id)}`);
    return { workspace: a.workspace, job, rec: o.body as ExecutionRecord };
  }

  app.post('/jobs/:job/executions', async (req, reply) => {
    const a = requireRole(req, 'member');
    const { job } = req.params as { job: string };
    const j = await resources.mustGet(jobKind, a.workspace, [], job);
    const body = (req.body ?? {}) as Record<string, any>;
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
      throw bad(
        '/memory',
        `memory must be an integer number of MB from ${MIN_MEMORY_MB} to ${MAX_MEMORY_MB}`,
      );
    const given = body.executionId ?? body.id;
    if (given !== undefined && (typeof given !== 'string' || !ID_PATTERN.test(given)))
      throw bad(
        '/executionId',
        'executionId must be 1-63 letters, digits or dashes, starting with a letter or digit',
      );
    if (j.body.spec?.enabled === false)
      throw new ApiError('INVALID_STATE', `job ${JSON.stringify(job)} is disabled`);
    const revId: string | undefined = j.body.activeRevision;
    const revision = (j.body.revisions ?? []).find((r: { id: string }) => r.id === revId);
    if (!revision)
      throw new ApiError(
        'INVALID_STATE',
        `job ${JSON.stringify(job)} has no deployed revision yet (status ${j.body.status ?? 'none'}): deploy its code first (berth deploy --kind job)`,
      );
    const digest = requestDigest({ tasks, env: body.env, memory: body.memory });
    const id = given ?? newExecutionId(now());
    const existing = await store.get(execKey(a.workspace, job, id));
    if (existing) {
      if ((existing.body as ExecutionRecord).requestDigest !== digest)
        throw new ApiError(
          'ALREADY_EXISTS',
          `execution ${JSON.stringify(id)} exists with other tasks or settings`,
        );
      return { executionId: id, id, jobId: job, workspaceId: a.workspace, tasks };
    }
    const rt = j.body.spec?.runtime ?? {};
    const at = new Date(now()).toISOString();
    const rec: ExecutionRecord = {
      id,
      job,
      status: 'pending',
      createdAt: at,
      updatedAt: at,
      revision: revision.id,
      app: revision.app,
      memoryMb: body.memory ?? rt.memory ?? 1024,
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
        { op: 'create', key: execKey(a.workspace, job, id), body: rec },
        ...tasks.map((input, index) => ({
          op: 'create' as const,
          key: taskKey(a.workspace, job, id, index),
          body: { index, input: input ?? {}, status: 'pending', attempts: 0 } satisfies TaskRecord,
        })),
      ]);
    } catch (err) {
      if (err instanceof StoreError && err.reason === 'exists')
        throw new ApiError('ALREADY_EXISTS', `execution ${JSON.stringify(id)} was created at the same time`);
      throw err;
    }
    await runner.track(created);
    reply.code(200);
    return { executionId: id, id, jobId: job, workspaceId: a.workspace, tasks };
  });

  app.get('/jobs/:job/executions', async (req, reply: FastifyReply) => {
    const a = requireRole(req, 'viewer');
    const { job } = req.params as { job: string };
    await resources.mustGet(jobKind, a.workspace, [], job);
    const page = await listPage(store, EXECUTION_KIND, a.workspace, job, req, reply);
    const items = await Promise.all(
      page.map(async (o) =>
        executionWire(a.workspace, o.body as ExecutionRecord, await tasksOf(a.workspace, job, o.name)),
      ),
    );
    return items;
  });

  app.get('/jobs/:job/executions/:id', async (req) => {
    const { workspace, job, rec } = await execution(req);
    return executionWire(workspace, rec, await tasksOf(workspace, job, rec.id));
  });

  app.delete('/jobs/:job/executions/:id', async (req) => {
    requireRole(req, 'member');
    const { workspace, job, rec } = await execution(req);
    await runner.cancel(workspace, job, rec.id);
    const o = await store.get(execKey(workspace, job, rec.id));
    return executionWire(
      workspace,
      (o?.body ?? rec) as ExecutionRecord,
      await tasksOf(workspace, job, rec.id),
    );
  });

  app.get('/jobs/:job/executions/:id/tasks', async (req) => {
    const { workspace, job, rec } = await execution(req);
    return (await tasksOf(workspace, job, rec.id)).map((t) => taskWire(t, rec));
  });

  app.get('/jobs/:job/executions/:id/tasks/:index/logs', async (req, reply) => {
    const { workspace, job, rec } = await execution(req);
    const index = Number((req.params as { index: string }).index);
    if (!Number.isInteger(index) || index < 0 || index >= rec.total)
      throw new ApiError(
        'NOT_FOUND',
        `execution ${rec.id} has no task ${JSON.stringify((req.params as { index: string }).index)}`,
      );
    let text = '';
    try {
      text = readFileSync(runner.logFile(workspace, job, rec.id, index), 'utf8');
    } catch {
      // No attempt has ended yet: an empty log.
    }
    reply.type('text/plain; charset=utf-8');
    return text;
  });
}
