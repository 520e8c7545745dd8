// The app of a job execution built again on this server (docs/decisions/077-placement-regions.md): a server that took
// over the lead of a cluster finds an execution whose tasks run an app not built here — its builds ahead (decision
// 067) did not make it (they make what the job serves: an execution may run an older revision), or failed. The
// runner asks for it here, from the revision that recorded the app (its source is on every server, decision 063), and
// a failure ends the waiting tasks' attempts per the job's retry policy instead of leaving them waiting for ever.
import { AppCopyError } from '../../builds/app-archive.js';
import { type BaseImage, BaseImageError, BuildError, type Builder } from '../../builds/builder.js';
import type { CodeStore } from '../../builds/code-store.js';
import type { Store } from '../../store/store.js';
import { KEPT_REVISIONS, type RevisionRecord } from '../code/source.js';

/** Why the app cannot be had here now: the message the tasks' attempts and the job's event carry. */
export class AppUnavailableError extends Error {
  override name = 'AppUnavailableError';
}

export interface JobRebuildDeps {
  store: Pick<Store, 'get'>;
  builder: Pick<Builder, 'baseImage' | 'keyOf' | 'build'>;
  code: Pick<CodeStore, 'has'>;
}

/**
 * Builds app `app` of job `job` again (Builder.build joins a build of the same key under way, the job's own reconcile
 * among them). Throws AppUnavailableError saying why it cannot, with the build's log tail when the build failed.
 */
export async function rebuildJobApp(
  deps: JobRebuildDeps,
  workspace: string,
  job: string,
  app: string,
  signal: AbortSignal,
): Promise<void> {
  const o = await deps.store.get({ kind: 'Job', workspace, parent: '', name: job });
  if (!o) throw new AppUnavailableError(`job ${job} no longer exists`);
  const rec = ((o.body.revisions ?? []) as RevisionRecord[]).find((r) => r.app === app);
  if (!rec)
    throw new AppUnavailableError(
      `app ${app} is of a revision the job no longer keeps (it keeps its ${KEPT_REVISIONS} latest), so it cannot be built again on this server`,
    );
  let base: BaseImage | undefined;
  try {
    base = deps.builder.baseImage(workspace, o.body.spec?.runtime?.image);
  } catch (err) {
    if (err instanceof BaseImageError)
      throw new AppUnavailableError(`revision ${rec.id} cannot be built on this server: ${err.message}`);
    throw err;
  }
  if (deps.builder.keyOf(workspace, rec.source, base) !== app)
    throw new AppUnavailableError(
      `revision ${rec.id} was built on another image than spec.runtime.image names now, so it cannot be built again on this server`,
    );
  if (!deps.code.has(workspace, rec.source))
    throw new AppUnavailableError(`the source of revision ${rec.id} is not on this server`);
  try {
    // In a cluster, copied from a node holding it with the digest the revision recorded (decision 094).
    await deps.builder.build(
      workspace,
      rec.source,
      signal,
      base,
      { kind: 'Job', name: job },
      { digest: rec.appDigest },
    );
  } catch (err) {
    if (err instanceof BuildError)
      throw new AppUnavailableError(`the build of revision ${rec.id} failed: ${err.message}\n${err.logTail}`);
    if (err instanceof AppCopyError)
      throw new AppUnavailableError(`revision ${rec.id} could not be had on this server: ${err.message}`);
    throw err;
  }
}
