// Executions of a job in the SDK's shapes (`@blaxel/core` createJobExecution, getJobExecution, listJobExecutions,
// deleteJobExecution): POST/GET /jobs/{job}/executions, GET/DELETE .../executions/{id}, GET .../{id}/tasks and each
// task's log (GET .../{id}/tasks/{index}/logs; ?follow=true streams it until the task ends). An execution runs
// the job's revision active when it was created.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PassThrough } from 'node:stream';
import { readFileSync } from 'node:fs';
import { requireRole } from '../auth/require-role.js';
import { ApiError } from '../errors.js';
import type { JobRunner } from '../controllers/job/job-runner.js';
import { createExecution } from '../controllers/job/job-create.js';
import { countTasks, type TaskStatus } from '../controllers/job/job-decide.js';
import {
  EXECUTION_KIND,
  type ExecutionRecord,
  execKey,
  TASK_KIND,
  type TaskRecord,
  tasksParent,
} from '../controllers/job/job-store.js';
import type { Resources } from '../store/resources.js';
import { followTaskLog, type LogFollowDeps } from '../controllers/job/job-log-follow.js';
import { listPage } from './pagination.js';

export interface JobExecutionRouteDeps {
  resources: Resources;
  runner: JobRunner;
  /** In a cluster: follows an attempt of a workspace's job running on another node (api/job-task-peer.ts). */
  remoteLog?: (
    workspace: string,
    ...rest: Parameters<NonNullable<LogFollowDeps['remote']>>
  ) => Promise<boolean>;
  now?: () => number;
}

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
    // In a cluster, the node its last attempt was placed on (read-only, as a sandbox's `node`).
    node: t.node,
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
    const { id, tasks } = await createExecution({ resources, runner, now }, a.workspace, j, req.body);
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
    const logFile = await runner.taskLogFile(workspace, job, rec.id, index);
    if ((req.query as Record<string, string>)?.follow === 'true') {
      reply.type('text/plain; charset=utf-8');
      return followResponse(req, reply, {
        logFile,
        state: () => runner.taskState(workspace, job, rec.id, index),
        socketOf: (sandbox) => runner.socketOf(sandbox),
        remote: deps.remoteLog && ((...rest) => deps.remoteLog!(workspace, ...rest)),
      });
    }
    let text = '';
    try {
      text = readFileSync(logFile, 'utf8');
    } catch {
      // No attempt has ended yet: an empty log.
    }
    reply.type('text/plain; charset=utf-8');
    return text;
  });
}

/** A streamed answer that ends when the task does, or stops following when the client goes away. */
function followResponse(req: FastifyRequest, reply: FastifyReply, deps: LogFollowDeps) {
  const out = new PassThrough();
  const gone = new AbortController();
  // The response's close, not the request's (which closes once its empty body is read).
  reply.raw.once('close', () => gone.abort());
  out.once('close', () => gone.abort());
  void followTaskLog(deps, (text) => text && out.write(text), gone.signal)
    .catch((err) => req.log.warn({ err }, 'following a task log failed'))
    .finally(() => out.end());
  return out;
}
