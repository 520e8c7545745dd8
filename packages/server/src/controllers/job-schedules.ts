// Schedule triggers of jobs (`type: schedule` or `cron`, `configuration.schedule` a cron expression in UTC, five
// or six fields): a tick looks at every deployed job's schedules and starts an execution with the trigger's tasks
// when a firing is due. The last firing is kept in the store (`JobSchedule` objects under the job), so firings
// missed while the server was down fire once at start, not once per missed time. A firing while an execution of the
// same schedule is still running is skipped (no overlap). Execution ids derive from the firing time: a firing
// is started at most once whatever happens in between.
import { Cron } from 'croner';
import type { Logger } from 'pino';
import type { Resources } from '../store/resources.js';
import type { StoredObject } from '../store/store.js';
import { createExecution } from './job-create.js';
import type { JobRunner } from './job-runner.js';

/** How often schedules are looked at: a firing starts within this of its time. */
export const SCHEDULE_TICK_MS = 250;
export const SCHEDULE_KIND = 'JobSchedule';

export interface ScheduleDeps {
  resources: Resources;
  runner: JobRunner;
  logger?: Logger;
  now?: () => number;
}

const isSchedule = (t: any) =>
  (t.type === 'schedule' || t.type === 'cron') && t.enabled !== false && t.configuration?.schedule;

/** The next firing of `expr` strictly after `afterMs`, in UTC; undefined when it never fires or does not parse. */
export function nextFiring(expr: string, afterMs: number): number | undefined {
  try {
    return new Cron(expr, { timezone: 'UTC', paused: true }).nextRun(new Date(afterMs))?.getTime();
  } catch {
    return undefined;
  }
}

export class JobSchedules {
  private timer?: NodeJS.Timeout;
  private busy = false;
  private readonly now: () => number;

  constructor(private readonly deps: ScheduleDeps) {
    this.now = deps.now ?? Date.now;
  }

  start() {
    this.timer = setInterval(() => void this.tick(), SCHEDULE_TICK_MS);
    this.timer.unref();
    void this.tick();
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
  }

  async tick() {
    if (this.busy) return;
    this.busy = true;
    try {
      for (const j of await this.deps.resources.store.list({ kind: 'Job' })) {
        if (j.body.spec?.enabled === false || j.body.status !== 'DEPLOYED') continue;
        for (const t of j.body.spec?.triggers ?? []) if (isSchedule(t)) await this.consider(j, t);
      }
    } catch (err) {
      this.deps.logger?.warn({ err }, 'job schedules tick failed');
    } finally {
      this.busy = false;
    }
  }

  private async consider(j: StoredObject, t: any) {
    const store = this.deps.resources.store;
    const key = { kind: SCHEDULE_KIND, workspace: j.workspace, parent: j.name, name: String(t.id) };
    const state = await store.get(key);
    const now = this.now();
    if (!state) {
      // A new schedule starts counting from now: nothing before it was missed.
      await store.write([
        { op: 'create', key, body: { lastFiredAt: now, expression: t.configuration.schedule } },
      ]);
      return;
    }
    const due = nextFiring(t.configuration.schedule, state.body.lastFiredAt);
    if (due === undefined || due > now) return;
    const prefix = `s-${String(t.id).slice(0, 30)}-`.toLowerCase().replace(/[^a-z0-9-]/g, '-');
    const overlapping = this.deps.runner.running(j.workspace, j.name).some((id) => id.startsWith(prefix));
    await store.write([{ op: 'update', key, mutate: (cur) => ({ ...cur.body, lastFiredAt: now }) }]);
    if (overlapping) {
      this.deps.logger?.info(
        { job: j.name, trigger: t.id },
        'schedule firing skipped: the previous run goes on',
      );
      return;
    }
    const body = { tasks: t.configuration.tasks ?? [{}], executionId: `${prefix}${due.toString(36)}` };
    await createExecution(
      { resources: this.deps.resources, runner: this.deps.runner, now: this.now },
      j.workspace,
      j,
      body,
    ).catch((err) =>
      this.deps.logger?.warn({ err, job: j.name, trigger: t.id }, 'schedule could not start an execution'),
    );
  }
}
