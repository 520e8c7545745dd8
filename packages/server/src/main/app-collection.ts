// Built apps no revision keeps any more are removed from this server's disk (a Node app's `node_modules` is tens of
// MB, and each deploy of new code builds one): once at start and then every APP_COLLECT_MS, every workspace's apps
// that no Agent, Function or Job keeps among its revisions (KEPT_REVISIONS each) and no unfinished job execution runs,
// built more than APP_KEEP_MS ago. On every server of a cluster alike: each collects its own disk by the same rule.
import { K } from '../auth/records.js';
import type { Builder } from '../builds/builder.js';
import { isExecutionEnded } from '../controllers/job/job-decide.js';
import { EXECUTION_KIND, type ExecutionRecord } from '../controllers/job/job-store.js';
import { EVERY_WORKSPACE, type Store } from '../store/store.js';
import type { Core } from './store.js';
import type { Runtime } from './runtime.js';
import type { Workloads } from './workloads.js';

export const APP_COLLECT_MS = 60 * 60_000;
/** An app younger than this is kept whatever the revisions say: its deploy may not have written its revision yet. */
export const APP_KEEP_MS = 60 * 60_000;

/**
 * The apps each workspace still needs: its objects' kept revisions', the build of each object's last uploaded source
 * (a deploy that failed records no revision, and its build log is what says why), and its unfinished executions'.
 */
export async function wantedApps(
  store: Store,
  builder: Pick<Builder, 'keyOf' | 'baseImage'>,
): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  const add = (workspace: string, app: unknown) => {
    if (typeof app !== 'string') return;
    const set = out.get(workspace) ?? new Set<string>();
    set.add(app);
    out.set(workspace, set);
  };
  for (const kind of ['Agent', 'Function', 'Job'])
    for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind })) {
      for (const r of o.body.revisions ?? []) add(o.workspace, r?.app);
      const digest = o.body.source?.digest;
      if (typeof digest === 'string')
        try {
          add(
            o.workspace,
            builder.keyOf(o.workspace, digest, builder.baseImage(o.workspace, o.body.spec?.runtime?.image)),
          );
        } catch {
          // Its image is not in the workspace now: its last build's key cannot be known, the revisions' stay.
        }
    }
  for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind: EXECUTION_KIND })) {
    const rec = o.body as ExecutionRecord;
    if (!isExecutionEnded(rec.status)) add(o.workspace, rec.app);
  }
  return out;
}

export function startAppCollection(parts: Core & Runtime & Workloads): { close(): void } {
  const { store, builder, images, logger } = parts;
  let running = false;
  const pass = async () => {
    if (running) return;
    running = true;
    try {
      const wanted = await wantedApps(store, builder);
      for (const w of await store.list({ workspace: EVERY_WORKSPACE, kind: K.workspace })) {
        const ws = w.name;
        const removed = builder.collectApps(ws, wanted.get(ws) ?? new Set(), APP_KEEP_MS, (name) =>
          images.release(ws, name),
        );
        if (removed.length)
          logger.info({ workspace: ws, apps: removed }, 'removed built apps no revision keeps');
      }
    } catch (err) {
      logger.warn({ err }, 'could not collect the built apps no revision keeps');
    } finally {
      running = false;
    }
  };
  void pass();
  const timer = setInterval(() => void pass(), APP_COLLECT_MS);
  timer.unref();
  return { close: () => clearInterval(timer) };
}
