// The workspace's sandbox schedules across its sandboxes (the service's `/schedules`, `/schedule-executions` and
// `/schedules/metrics`): the same records as under /sandboxes/{sandboxName}/..., gathered from every sandbox of the
// workspace the request acts in, filtered, and ordered by creation time (newest first unless `sort` says).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireRole, wantsSecrets } from '../auth/require-role.js';
import { ApiError, type FieldIssue } from '../errors.js';
import { SCHEDULE_EXECUTION_KIND, SCHEDULE_KIND } from '../kinds/sandbox.js';
import { isGone } from '../kinds/status.js';
import type { Resources } from '../store/resources.js';
import type { StoredObject } from '../store/store.js';
import { memoryPage } from './pagination.js';
import { type ScheduleRecord, scheduleView } from './sandbox-schedules.js';

/** How far back the metrics window may start (the service's bound). */
export const METRICS_MAX_AGE_MS = 7 * 24 * 3_600_000;
/** The metrics window when `since` is not given: the day before `until`. */
export const METRICS_DEFAULT_SPAN_MS = 24 * 3_600_000;
/** `q` shorter than this is ignored, as the service does. */
const MIN_QUERY = 2;

type Query = Record<string, string | undefined>;

const refuse = (issues: FieldIssue[]) =>
  new ApiError('MALFORMED_REQUEST', issues.map((i) => `${i.pointer}: ${i.message}`).join('; '), {
    errors: issues,
  });

/** `createdAt:desc` (the default) or `createdAt:asc`; anything else is a 400. */
function descending(q: Query): boolean {
  if (q.sort === undefined || q.sort === 'createdAt:desc') return true;
  if (q.sort === 'createdAt:asc') return false;
  throw refuse([{ pointer: '/query/sort', message: 'must be createdAt:desc or createdAt:asc' }]);
}

/** An RFC 3339 time of the query, or undefined when absent. */
function timeOf(q: Query, name: string, issues: FieldIssue[]): number | undefined {
  const v = q[name];
  if (v === undefined || v === '') return undefined;
  const t = Date.parse(v);
  if (Number.isNaN(t)) issues.push({ pointer: `/query/${name}`, message: 'must be an RFC 3339 time' });
  return t;
}

const matches = (q: Query, ...fields: (string | undefined)[]) => {
  const needle = q.q?.trim().toLowerCase();
  if (!needle || needle.length < MIN_QUERY) return true;
  return fields.some((f) => f?.toLowerCase().includes(needle));
};

const minute = (ms: number) => Math.floor(ms / 60_000) * 60_000;

export function register(v0: FastifyInstance, deps: { resources: Resources; now?: () => number }) {
  const { resources } = deps;
  const now = deps.now ?? Date.now;
  const records = (req: FastifyRequest, kind: string) => {
    const a = requireRole(req, 'viewer');
    return resources.store.list({ kind, workspace: a.workspace });
  };

  v0.get('/schedules', async (req, reply) => {
    const q = (req.query ?? {}) as Query;
    const desc = descending(q);
    const open = wantsSecrets(req) ? (v: string) => resources.openSecret(v) : undefined;
    const all = (await records(req, SCHEDULE_KIND)).filter((o) => {
      const r = o.body as ScheduleRecord;
      return (
        (!q.sandbox || o.parent === q.sandbox) &&
        (q.type !== 'cron' && q.type !== 'at' ? true : r.type === q.type) &&
        matches(q, r.id, o.parent, r.input?.name, r.input?.command)
      );
    });
    const page = memoryPage(all, (o) => [o.body.createdAt, o.parent, o.name], req, reply, desc);
    return page.map((o) => scheduleView(o.body as ScheduleRecord, open));
  });

  v0.get('/schedule-executions', async (req, reply) => {
    const q = (req.query ?? {}) as Query;
    const desc = descending(q);
    const issues: FieldIssue[] = [];
    const since = timeOf(q, 'since', issues);
    const until = timeOf(q, 'until', issues);
    if (q.status !== undefined && q.status !== 'succeeded' && q.status !== 'failed')
      issues.push({ pointer: '/query/status', message: 'must be succeeded or failed' });
    if (issues.length) throw refuse(issues);
    const all = (await records(req, SCHEDULE_EXECUTION_KIND)).filter((o) => {
      const e = o.body;
      const at = Date.parse(e.createdAt);
      return (
        (!q.sandbox || o.parent === q.sandbox) &&
        (!q.schedule || e.scheduleId === q.schedule) &&
        (!q.status || e.status === q.status) &&
        (since === undefined || at >= since) &&
        (until === undefined || at <= until) &&
        matches(q, e.id, o.parent, e.scheduleId, e.processName)
      );
    });
    return memoryPage(all, (o) => [o.body.createdAt, o.parent, o.name], req, reply, desc).map((o) => o.body);
  });

  v0.get('/schedules/metrics', async (req) => {
    const a = requireRole(req, 'viewer');
    const q = (req.query ?? {}) as Query;
    const issues: FieldIssue[] = [];
    const nowMs = now();
    // By default the window ends with the current minute, which it includes.
    const until = minute(timeOf(q, 'until', issues) ?? nowMs + 60_000);
    const since = minute(timeOf(q, 'since', issues) ?? until - METRICS_DEFAULT_SPAN_MS);
    if (!issues.length && since < minute(nowMs - METRICS_MAX_AGE_MS))
      issues.push({ pointer: '/query/since', message: 'must be within the last 7 days' });
    if (!issues.length && since >= until)
      issues.push({ pointer: '/query/since', message: 'must be before until' });
    if (issues.length) throw refuse(issues);
    const list = (kind: string) => resources.store.list({ kind, workspace: a.workspace });
    const inWindow = (await list(SCHEDULE_EXECUTION_KIND)).filter((o: StoredObject) => {
      const at = Date.parse(o.body.createdAt);
      return at >= since && at < until;
    });
    const count = (status: string) => inWindow.filter((o) => o.body.status === status).length;
    return {
      since: new Date(since).toISOString(),
      until: new Date(until).toISOString(),
      executions: inWindow.length,
      executionsByStatus: { succeeded: count('succeeded'), failed: count('failed') },
      sandboxes: (await list('Sandbox')).filter((o) => !isGone(resources.view(resources.kind('Sandbox'), o)))
        .length,
      schedules: (await list(SCHEDULE_KIND)).length,
    };
  });
}
