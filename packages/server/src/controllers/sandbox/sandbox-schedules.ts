// Fires sandbox schedules (api/sandbox-schedules.ts): each due schedule starts its command in its sandbox, an
// execution record says whether the sandbox accepted it, and the schedule moves to its next firing (a one-off is
// removed once it fired). The clock is
// injected and `tick()` does one pass, so tests drive it without timers. The next firing is stored with the
// schedule, so a restarted server picks up where it was; a firing missed while it was down fires once at start.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { SCHEDULE_EXECUTION_KIND, SCHEDULE_KIND } from '../../kinds/sandbox.js';
import { isGone } from '../../kinds/status.js';
import type { ProcessRequest } from '../../sandbox-api/schema.js';
import type { Resources } from '../../store/resources.js';
import { keyOf, type StoredObject, StoreError, EVERY_WORKSPACE } from '../../store/store.js';
import { nextFiring } from '../core/schedule-timing.js';

/** Longest sleep between passes: a bound, so a clock change or a missed watch event costs at most this. */
export const SCHEDULE_MAX_SLEEP_MS = 30_000;
/** A process a schedule starts stops after this many seconds unless its input says (the service's default). */
export const SCHEDULE_DEFAULT_TIMEOUT_S = 600;

/** What the runner needs from a sandbox: start a process through its API (the gateway's sandbox call). */
export type StartProcess = (
  workspace: string,
  sandbox: string,
  req: ProcessRequest,
) => Promise<{ statusCode: number; body?: unknown; error?: string }>;

export interface ScheduleRunnerDeps {
  resources: Resources;
  startProcess: StartProcess;
  now: () => number;
  logger?: Logger;
  /**
   * Whether this server fires the schedules of a sandbox: in a cluster, the node it is placed on (its processes are
   * there); default every one.
   */
  holds?: (workspace: string, sandbox: string) => boolean;
}

/** Execution ids sort newest first by name (lists are ordered by name): the time counts down. */
const LATEST_MS = 8.64e15;
const executionId = (ms: number) =>
  `${Math.floor(LATEST_MS - ms)
    .toString(36)
    .padStart(11, '0')}-${randomBytes(3).toString('hex')}`;

export class ScheduleRunner {
  private timer?: NodeJS.Timeout;
  private unwatch?: () => void;
  private running?: Promise<void>;
  private stopped = false;
  /** A change arrived during a pass: run another when it ends. */
  private again = false;

  constructor(private readonly deps: ScheduleRunnerDeps) {}

  /** One pass: fires every schedule due now, once. Returns the epoch ms of the next firing, if any. */
  async tick(): Promise<number | undefined> {
    const { resources } = this.deps;
    const nowMs = this.deps.now();
    let soonest: number | undefined;
    for (const o of await resources.store.list({ workspace: EVERY_WORKSPACE, kind: SCHEDULE_KIND })) {
      if (this.deps.holds && !this.deps.holds(o.workspace, o.parent)) continue;
      const at = Date.parse(o.body.nextAt ?? '');
      if (!Number.isFinite(at)) continue;
      if (at > nowMs) {
        soonest = soonest === undefined ? at : Math.min(soonest, at);
        continue;
      }
      const next = await this.fire(o, nowMs);
      if (next !== undefined) soonest = soonest === undefined ? next : Math.min(soonest, next);
    }
    return soonest;
  }

  /** Starts the command, records the execution, and moves the schedule on. Returns its next firing. */
  private async fire(o: StoredObject, nowMs: number): Promise<number | undefined> {
    const { resources } = this.deps;
    const r = o.body;
    const executedAt = new Date(nowMs).toISOString();
    const next = r.type === 'cron' ? nextFiring({ type: 'cron', value: r.value }, nowMs) : undefined;
    // The schedule moves on first, at the version read: an update that landed meanwhile wins, and a firing is
    // never started twice for one due time (two passes racing, or a crash after the start). A one-off (`at`) that
    // fires is removed, as the service does; its executions stay, listed under its sandbox.
    try {
      await resources.store.write([
        next === undefined
          ? { op: 'delete', key: keyOf(o), expectVersion: o.resourceVersion }
          : {
              op: 'update',
              key: keyOf(o),
              body: { ...r, lastRunAt: executedAt, nextAt: new Date(next).toISOString() },
              expectVersion: o.resourceVersion,
            },
      ]);
    } catch (e) {
      if (e instanceof StoreError) return undefined;
      throw e;
    }
    const input = r.input ?? {};
    const processName = input.name ?? `schedule-${r.id}`;
    const timeout = input.timeout ?? SCHEDULE_DEFAULT_TIMEOUT_S;
    const sandbox = await resources.store.get({
      kind: 'Sandbox',
      workspace: o.workspace,
      parent: '',
      name: o.parent,
    });
    let result: { statusCode: number; error?: string };
    if (!sandbox || isGone(sandbox) || sandbox.body.spec?.enabled === false)
      result = { statusCode: 0, error: `sandbox ${JSON.stringify(o.parent)} is not running` };
    else {
      const env = input.env
        ? Object.fromEntries(
            Object.entries(input.env as Record<string, string>).map(([k, v]) => [k, resources.openSecret(v)]),
          )
        : undefined;
      const answer = await this.deps.startProcess(o.workspace, o.parent, {
        command: input.command,
        name: processName,
        ...(input.workingDir ? { workingDir: input.workingDir } : {}),
        ...(env ? { env } : {}),
        keepAlive: input.keepAlive ?? true,
        timeout,
      });
      const detail = (answer.body as { error?: unknown } | undefined)?.error;
      result = {
        statusCode: answer.statusCode,
        error:
          answer.error ??
          (answer.statusCode >= 400 ? String(detail ?? `HTTP ${answer.statusCode}`) : undefined),
      };
    }
    const ok = result.statusCode >= 200 && result.statusCode < 400;
    const id = executionId(nowMs);
    const record = {
      id,
      scheduleId: r.id,
      sandbox: o.parent,
      executedAt,
      createdAt: executedAt,
      status: ok ? 'succeeded' : 'failed',
      statusCode: result.statusCode,
      processName,
      timeout,
      ...(ok ? {} : { error: result.error ?? 'the sandbox refused the command' }),
    };
    const parent = { kind: SCHEDULE_EXECUTION_KIND, workspace: o.workspace, parent: o.parent };
    await resources.store.write([{ op: 'create', key: { ...parent, name: id }, body: record }]);
    await this.prune(o, r.maxExecutions ?? 100);
    this.deps.logger?.info(
      {
        workspace: o.workspace,
        sandbox: o.parent,
        schedule: r.id,
        status: record.status,
        statusCode: result.statusCode,
      },
      'schedule fired',
    );
    return next;
  }

  /** Keeps the newest `max` executions of one schedule. */
  private async prune(o: StoredObject, max: number) {
    const all = await this.deps.resources.store.list({
      kind: SCHEDULE_EXECUTION_KIND,
      workspace: o.workspace,
      parent: o.parent,
    });
    const mine = all.filter((e) => e.body.scheduleId === o.body.id);
    const extra = mine.slice(max);
    if (extra.length)
      await this.deps.resources.store.write(extra.map((e) => ({ op: 'delete' as const, key: keyOf(e) })));
  }

  /** Runs passes until stopped: at the next firing, when a schedule changes, and at least every MAX_SLEEP. */
  start(): void {
    this.unwatch = this.deps.resources.store.watch((c) => {
      if (c.object.kind === SCHEDULE_KIND && c.type !== 'DELETED') this.wake();
    });
    this.wake();
  }

  private wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.tick()
      .catch((err) => {
        this.deps.logger?.error({ err }, 'a schedule pass failed');
        return undefined;
      })
      .then((next) => {
        this.running = undefined;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          return this.wake();
        }
        const wait = next === undefined ? SCHEDULE_MAX_SLEEP_MS : Math.max(0, next - this.deps.now());
        this.timer = setTimeout(() => this.wake(), Math.min(wait, SCHEDULE_MAX_SLEEP_MS));
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.unwatch?.();
    await this.running;
  }
}
