// Schedule triggers of jobs and agents (`type: schedule` or `cron`, `configuration.schedule` a cron expression in
// UTC, five or six fields): a tick looks at every deployed job's and agent's schedules and fires the ones due — a
// job starts an execution with the trigger's tasks, an agent is sent each task's body (the kind's `fire`). The
// last firing is kept in the store (one record per trigger under its object), so firings missed while the server
// was down fire once at start, not once per missed time. A firing while the same schedule's previous one still
// runs is skipped (no overlap). Firing ids derive from the firing time: a firing is started at most once.
import type { Logger } from 'pino';
import type { Resources } from '../../store/resources.js';
import type { StoredObject } from '../../store/store.js';
import { nextFiring as nextTiming } from '../core/schedule-timing.js';
import { EVERY_WORKSPACE } from '../../store/store.js';

/** How often schedules are looked at: a firing starts within this of its time. */
export const SCHEDULE_TICK_MS = 250;

/** What firing means for one kind. */
export interface ScheduledKind {
  /** Where the trigger's last firing is stored (a record kind, parent = the object's name). */
  stateKind: string;
  /** Whether an earlier firing of this trigger (ids starting with `prefix`) still runs. */
  running(o: StoredObject, prefix: string): boolean;
  /** Starts the firing `firingId` of trigger `t`; errors are logged, the firing is not retried. */
  fire(o: StoredObject, t: any, firingId: string): Promise<void>;
}

export interface ScheduleDeps {
  resources: Resources;
  /** The kinds whose triggers are scheduled, by kind name (`Job`, `Agent`). */
  kinds: Record<string, ScheduledKind>;
  logger?: Logger;
  now?: () => number;
}

const isSchedule = (t: any) =>
  (t.type === 'schedule' || t.type === 'cron') && t.enabled !== false && t.configuration?.schedule;

/** The next firing of `expr` strictly after `afterMs`, in UTC; undefined when it never fires or does not parse. */
export function nextFiring(expr: string, afterMs: number): number | undefined {
  try {
    return nextTiming({ type: 'cron', value: expr }, afterMs);
  } catch {
    return undefined;
  }
}

/** The prefix of a trigger's firing ids: the trigger id, made safe for an execution id. */
export const firingPrefix = (triggerId: unknown) =>
  `s-${String(triggerId).slice(0, 30)}-`.toLowerCase().replace(/[^a-z0-9-]/g, '-');

export class TriggerSchedules {
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
      for (const [kind, k] of Object.entries(this.deps.kinds))
        for (const o of await this.deps.resources.store.list({ workspace: EVERY_WORKSPACE, kind })) {
          if (o.body.spec?.enabled === false || o.body.status !== 'DEPLOYED') continue;
          for (const t of o.body.spec?.triggers ?? []) if (isSchedule(t)) await this.consider(k, o, t);
        }
    } catch (err) {
      this.deps.logger?.warn({ err }, 'schedule triggers tick failed');
    } finally {
      this.busy = false;
    }
  }

  private async consider(k: ScheduledKind, o: StoredObject, t: any) {
    const store = this.deps.resources.store;
    const key = { kind: k.stateKind, workspace: o.workspace, parent: o.name, name: String(t.id) };
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
    const prefix = firingPrefix(t.id);
    const overlapping = k.running(o, prefix);
    await store.write([{ op: 'update', key, mutate: (cur) => ({ ...cur.body, lastFiredAt: now }) }]);
    const what = { kind: o.body.kind ?? k.stateKind, name: o.name, trigger: t.id };
    if (overlapping) {
      this.deps.logger?.info(what, 'schedule firing skipped: the previous run goes on');
      return;
    }
    await k
      .fire(o, t, `${prefix}${due.toString(36)}`)
      .catch((err) => this.deps.logger?.warn({ err, ...what }, 'schedule could not fire'));
  }
}
