// Sandbox schedules (the service's feature, docs/sandboxes.md): timed commands on a sandbox, under
// /sandboxes/{sandboxName}/schedules, stored as records of the sandbox (removed with it) and fired by the
// schedule runner (controllers/sandbox/sandbox-schedules.ts). Their envs are sealed at rest and masked unless an admin
// asks `show_secrets`. Executions are listed newest first under /sandboxes/{sandboxName}/schedule-executions.
import { randomBytes } from 'node:crypto';
import { Type } from '../kinds/typebox.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireRole, wantsSecrets } from '../auth/require-role.js';
import { nextFiring, resolveTiming, type StoredTiming } from '../controllers/core/schedule-timing.js';
import { ApiError, invalid, notFound } from '../errors.js';
import { opt, StringMap } from '../kinds/common.js';
import { SCHEDULE_EXECUTION_KIND, SCHEDULE_KIND } from '../kinds/sandbox.js';
import { checkValue, prune } from '../kinds/schema.js';
import { REDACTED } from '../kinds/secret-paths.js';
import { isGone } from '../kinds/status.js';
import type { Resources } from '../store/resources.js';
import { keyOf as storeKeyOf, type ResourceKey, StoreError, type StoredObject } from '../store/store.js';
import { warnDropped } from './crud.js';
import { listPage } from './pagination.js';

/** Schedules one sandbox may hold: each is looked at by the runner, so the set stays bounded. */
export const MAX_SCHEDULES_PER_SANDBOX = 100;
/** Execution records kept per schedule when it does not say (the service's default). */
export const DEFAULT_MAX_EXECUTIONS = 100;
/** Upper bound of `maxExecutions`: executions are records in the store. */
export const MAX_EXECUTIONS_LIMIT = 1000;

const ID = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' });

export const ScheduleInput = Type.Object({
  command: Type.String({ minLength: 1 }),
  env: opt(StringMap),
  keepAlive: opt(Type.Boolean()),
  name: opt(Type.String({ minLength: 1, maxLength: 128 })),
  timeout: opt(Type.Integer({ minimum: 0 })),
  workingDir: opt(Type.String({ minLength: 1 })),
});

export const ScheduleBody = Type.Object({
  id: opt(ID),
  type: Type.Union([Type.Literal('cron'), Type.Literal('at'), Type.Literal('sleep')]),
  value: Type.String({ minLength: 1 }),
  input: ScheduleInput,
  maxExecutions: opt(Type.Integer({ minimum: 1, maximum: MAX_EXECUTIONS_LIMIT })),
});

/** The stored record: the timing with `sleep` resolved, the next firing, and the last one. */
export interface ScheduleRecord extends StoredTiming {
  id: string;
  sandbox: string;
  input: {
    command: string;
    env?: Record<string, string>;
    keepAlive?: boolean;
    name?: string;
    timeout?: number;
    workingDir?: string;
  };
  maxExecutions: number;
  createdAt: string;
  updatedAt: string;
  /** ISO time of the next firing (an `at` schedule is removed once it fired). */
  nextAt?: string;
  lastRunAt?: string;
}

/** Fields of a response a client may send back in a PUT; dropped without a warning. */
const READ_ONLY = ['createdAt', 'updatedAt', 'sandbox', 'nextAt', 'lastRunAt'];

export function scheduleView(r: ScheduleRecord, open?: (v: string) => string) {
  const env = r.input.env
    ? Object.fromEntries(Object.entries(r.input.env).map(([k, v]) => [k, open ? open(v) : REDACTED]))
    : undefined;
  return {
    id: r.id,
    type: r.type,
    value: r.value,
    input: { ...r.input, ...(env ? { env } : {}) },
    maxExecutions: r.maxExecutions,
    sandbox: r.sandbox,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    ...(r.nextAt ? { nextAt: r.nextAt } : {}),
    ...(r.lastRunAt ? { lastRunAt: r.lastRunAt } : {}),
  };
}

export interface ScheduleDeps {
  resources: Resources;
  now?: () => Date;
}

export function register(v0: FastifyInstance, deps: ScheduleDeps) {
  const { resources } = deps;
  const now = deps.now ?? (() => new Date());
  const base = '/sandboxes/:sandboxName/schedules';
  const sandboxKind = resources.kind('Sandbox');

  async function sandboxOf(req: FastifyRequest, workspace: string) {
    const { sandboxName } = req.params as Record<string, string>;
    const s = await resources.mustGet(sandboxKind, workspace, [], sandboxName);
    return { s, sandboxName };
  }
  const keyOf = (workspace: string, sandbox: string, id: string): ResourceKey => ({
    kind: SCHEDULE_KIND,
    workspace,
    parent: sandbox,
    name: id,
  });
  const viewOf = (req: FastifyRequest, r: ScheduleRecord) =>
    scheduleView(r, wantsSecrets(req) ? (v) => resources.openSecret(v) : undefined);

  /** Checks a body and makes the record (keeping a stored env value echoed back masked). */
  function recordOf(raw: unknown, sandbox: string, id: string, prev?: ScheduleRecord) {
    const body = structuredClone(raw ?? {}) as any;
    if (body && typeof body === 'object') for (const k of READ_ONLY) delete body[k];
    const dropped = prune(ScheduleBody, body);
    const issues = checkValue(ScheduleBody, body);
    if (issues.length) throw invalid(issues);
    const at = now();
    const timing = resolveTiming(body.type, body.value, at.getTime());
    if (!timing.ok) throw invalid([{ pointer: '/value', message: timing.reason }]);
    const env: Record<string, string> | undefined = body.input.env;
    if (env)
      for (const [k, v] of Object.entries(env)) {
        if (v !== REDACTED) env[k] = resources.sealSecret(v);
        else if (prev?.input.env?.[k] !== undefined) env[k] = prev.input.env[k];
        else
          throw invalid([
            { pointer: `/input/env/${k}`, message: 'a masked value was sent with no stored value to keep' },
          ]);
      }
    const t = timing.timing;
    const next = t.type === 'at' ? Date.parse(t.value) : nextFiring(t, at.getTime());
    const record: ScheduleRecord = {
      id,
      type: t.type,
      value: t.value,
      input: body.input,
      maxExecutions: body.maxExecutions ?? prev?.maxExecutions ?? DEFAULT_MAX_EXECUTIONS,
      sandbox,
      createdAt: prev?.createdAt ?? at.toISOString(),
      updatedAt: at.toISOString(),
      ...(next !== undefined ? { nextAt: new Date(next).toISOString() } : {}),
      ...(prev?.lastRunAt ? { lastRunAt: prev.lastRunAt } : {}),
    };
    return { record, dropped };
  }

  v0.post(base, async (req, reply) => {
    const a = requireRole(req, 'member');
    const { s, sandboxName } = await sandboxOf(req, a.workspace);
    if (isGone(s))
      throw new ApiError('INVALID_STATE', `sandbox ${JSON.stringify(sandboxName)} is being deleted`);
    const given = (req.body as { id?: unknown } | undefined)?.id;
    const id = typeof given === 'string' ? given : `sched-${randomBytes(4).toString('hex')}`;
    const { record, dropped } = recordOf(req.body, sandboxName, id);
    const existing = await resources.store.list({
      kind: SCHEDULE_KIND,
      workspace: a.workspace,
      parent: sandboxName,
    });
    if (existing.length >= MAX_SCHEDULES_PER_SANDBOX)
      throw new ApiError(
        'QUOTA_EXCEEDED',
        `sandbox ${JSON.stringify(sandboxName)} already has ${MAX_SCHEDULES_PER_SANDBOX} schedules; delete some first`,
      );
    try {
      const [o] = await resources.store.write([
        {
          op: 'create',
          key: keyOf(a.workspace, sandboxName, id),
          body: record as unknown as Record<string, any>,
        },
      ]);
      warnDropped(reply, dropped);
      return viewOf(req, o.body as ScheduleRecord);
    } catch (e) {
      if (e instanceof StoreError && e.reason === 'exists')
        throw new ApiError('ALREADY_EXISTS', `schedule ${JSON.stringify(id)} already exists`, {
          code: 'SCHEDULE_ALREADY_EXISTS',
        });
      throw e;
    }
  });

  v0.get(base, async (req, reply) => {
    const a = requireRole(req, 'viewer');
    const { sandboxName } = await sandboxOf(req, a.workspace);
    const type = ((req.query ?? {}) as Record<string, string>).type;
    // Only cron and at are stored (sleep became at); any other value is ignored, as the service does.
    const keep = type === 'cron' || type === 'at' ? (o: StoredObject) => o.body.type === type : undefined;
    const page = await listPage(resources.store, SCHEDULE_KIND, a.workspace, sandboxName, req, reply, keep);
    return page.map((o) => viewOf(req, o.body as ScheduleRecord));
  });

  async function mustGet(req: FastifyRequest, workspace: string) {
    const { sandboxName } = await sandboxOf(req, workspace);
    const { scheduleId } = req.params as Record<string, string>;
    const o = await resources.store.get(keyOf(workspace, sandboxName, scheduleId));
    if (!o)
      throw notFound(`schedule ${JSON.stringify(scheduleId)} of sandbox ${JSON.stringify(sandboxName)}`);
    return { o, sandboxName, scheduleId };
  }

  v0.get(`${base}/:scheduleId`, async (req) => {
    const a = requireRole(req, 'viewer');
    return viewOf(req, (await mustGet(req, a.workspace)).o.body as ScheduleRecord);
  });

  v0.put(`${base}/:scheduleId`, async (req, reply) => {
    const a = requireRole(req, 'member');
    const { o, sandboxName, scheduleId } = await mustGet(req, a.workspace);
    const given = (req.body as { id?: unknown } | undefined)?.id;
    if (given !== undefined && given !== scheduleId)
      throw invalid([{ pointer: '/id', message: `must equal the id in the path (${scheduleId})` }]);
    const { record, dropped } = recordOf(req.body, sandboxName, scheduleId, o.body as ScheduleRecord);
    try {
      const [w] = await resources.store.write([
        {
          op: 'update',
          key: keyOf(a.workspace, sandboxName, scheduleId),
          body: record as any,
          expectVersion: o.resourceVersion,
        },
      ]);
      warnDropped(reply, dropped);
      return viewOf(req, w.body as ScheduleRecord);
    } catch (e) {
      // The runner recorded a firing meanwhile: the client may simply send the update again.
      if (e instanceof StoreError && e.reason === 'conflict')
        throw new ApiError(
          'CONFLICT',
          `schedule ${JSON.stringify(scheduleId)} changed meanwhile; send the update again`,
        );
      throw e;
    }
  });

  v0.delete(`${base}/:scheduleId`, async (req) => {
    const a = requireRole(req, 'member');
    const { o } = await mustGet(req, a.workspace);
    await resources.store.write([{ op: 'delete', key: storeKeyOf(o) }]);
    return viewOf(req, o.body as ScheduleRecord);
  });

  v0.get('/sandboxes/:sandboxName/schedule-executions', async (req, reply) => {
    const a = requireRole(req, 'viewer');
    const { sandboxName } = await sandboxOf(req, a.workspace);
    const page = await listPage(
      resources.store,
      SCHEDULE_EXECUTION_KIND,
      a.workspace,
      sandboxName,
      req,
      reply,
    );
    return page.map((o) => o.body);
  });
}
