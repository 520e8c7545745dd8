// Deletes sandboxes whose time is up: runtime.ttl (max age from when it first ran), runtime.expires (a date) and
// lifecycle.expirationPolicies (ttl-idle from the last use, ttl-max-age, date; action delete); and previews past
// their ttl or expires. A sweep every few seconds over every one keeps each deletion at most one sweep (plus the
// delete itself) late.
import type { Logger } from 'pino';
import { previewExpiresAtMs } from '../../kinds/preview.js';
import { expiresAtMs } from '../../kinds/sandbox.js';
import { isGone } from '../../kinds/status.js';
import type { Resources } from '../../store/resources.js';
import type { StoredObject } from '../../store/store.js';
import { EVERY_WORKSPACE } from '../../store/store.js';

/** Sweep period: half of the 10 s lateness DESIGN.md allows, leaving the rest for the deletion itself. */
export const EXPIRY_SWEEP_MS = 5_000;
/** Who the DELETING event names. */
export const EXPIRY_ACTOR = 'berth:expiry';

export interface ExpiryDeps {
  resources: Resources;
  logger: Logger;
  now?: () => Date;
  /** The gateway's own last-use time (fresher than the stored lastUsedAt, written only every few seconds). */
  lastUsedMs?: (workspace: string, name: string) => number | undefined;
  sweepMs?: number;
}

/** The sandboxes due for deletion at `nowMs` (pure: the decision, apart from the act). */
export function dueSandboxes(
  objects: StoredObject[],
  nowMs: number,
  lastUsedMs: ExpiryDeps['lastUsedMs'] = () => undefined,
): StoredObject[] {
  return objects.filter((o) => {
    if (isGone(o)) return false;
    const seen = lastUsedMs(o.workspace, o.name);
    const stored = Date.parse(o.body.lastUsedAt ?? '');
    const body =
      seen !== undefined && !(stored >= seen)
        ? { ...o.body, lastUsedAt: new Date(seen).toISOString() }
        : o.body;
    const at = expiresAtMs(body, nowMs);
    return at !== undefined && at <= nowMs;
  });
}

/** The previews due for deletion at `nowMs`. */
export function duePreviews(objects: StoredObject[], nowMs: number): StoredObject[] {
  return objects.filter((o) => {
    if (isGone(o)) return false;
    const at = previewExpiresAtMs(o.body);
    return at !== undefined && at <= nowMs;
  });
}

export class SandboxExpiry {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private readonly now: () => Date;

  constructor(private readonly deps: ExpiryDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  start(): void {
    this.timer = setInterval(() => {
      // A sweep whose listing failed (the database restarting) is tried again at the next tick; unhandled, its
      // rejection ended the process (exit 1) instead of the leader's exit 75 in flows-failures' database restart.
      this.running ??= this.sweep()
        .catch((err) =>
          this.deps.logger.warn({ err }, 'the sandbox expiry sweep failed; the next one retries'),
        )
        .finally(() => {
          this.running = undefined;
        });
    }, this.deps.sweepMs ?? EXPIRY_SWEEP_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One sweep: marks every due sandbox DELETING (the reconciler does the rest). Returns their names. */
  async sweep(): Promise<string[]> {
    const { resources, logger } = this.deps;
    const kd = resources.kind('Sandbox');
    const due = dueSandboxes(
      await resources.store.list({ workspace: EVERY_WORKSPACE, kind: 'Sandbox' }),
      this.now().getTime(),
      this.deps.lastUsedMs,
    );
    const deleted: string[] = [];
    for (const o of due) {
      try {
        await resources.delete(kd, { workspace: o.workspace, parents: [], actor: EXPIRY_ACTOR }, o.name);
        deleted.push(`${o.workspace}/${o.name}`);
      } catch (err) {
        logger.warn(
          { err, sandbox: `${o.workspace}/${o.name}` },
          'deleting an expired sandbox failed; next sweep retries',
        );
      }
    }
    if (deleted.length) logger.info({ sandboxes: deleted }, 'deleted expired sandboxes');
    const pk = resources.kind('Preview');
    for (const o of duePreviews(
      await resources.store.list({ workspace: EVERY_WORKSPACE, kind: 'Preview' }),
      this.now().getTime(),
    )) {
      const ctx = { workspace: o.workspace, parents: [o.parent], actor: EXPIRY_ACTOR };
      try {
        await resources.delete(pk, ctx, o.name);
        logger.info({ preview: `${o.workspace}/${o.parent}/${o.name}` }, 'deleted an expired preview');
      } catch (err) {
        // Its sandbox may be going away with it (a cascade): the next sweep finds nothing left or retries.
        logger.debug(
          { err, preview: `${o.workspace}/${o.parent}/${o.name}` },
          'deleting an expired preview failed',
        );
      }
    }
    return deleted;
  }
}
