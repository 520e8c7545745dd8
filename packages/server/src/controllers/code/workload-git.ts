// The clone step of an agent, function or job whose spec.repository is a git repository: UPLOADING while the
// branch is cloned into the code store (builds/git-source.ts), then BUILDING with the source recorded as an upload
// would record it, plus what was cloned; a failed clone is FAILED with git's message. It runs when nothing was
// stored yet or the spec names another URL or branch than the last clone (an upload made meanwhile is kept).
import type { Builder } from '../../builds/builder.js';
import { GitFetchError, gitRepositoryOf } from '../../builds/git-source.js';
import { isGone } from '../../kinds/status.js';
import { keyOf, type StoredObject } from '../../store/store.js';
import { type ControllerDeps, transition } from '../core/events.js';
import { DONE, type ReconcileResult, TerminalError } from '../core/reconciler.js';

const enabled = (o: StoredObject) => o.body.spec?.enabled !== false;

export interface SourceRecord {
  digest: string;
  size: number;
  uploadedAt: string;
  /** Set when the source is a clone of spec.repository (git): what was cloned. */
  repository?: { url: string; branch?: string; commit: string };
}

/** Clones when due; the reconcile's result then, or undefined when there is nothing to clone. */
export async function cloneStep(
  deps: ControllerDeps & { builder: Pick<Builder, 'fetchGit'> },
  o: StoredObject,
  source: SourceRecord | undefined,
  signal: AbortSignal,
): Promise<ReconcileResult | undefined> {
  const repo = gitRepositoryOf(o.body.spec);
  const last = source?.repository;
  if (!repo || (source && (!last || (last.url === repo.url && last.branch === repo.branch))))
    return undefined;
  // A failed clone waits for a spec change (which leaves FAILED) instead of cloning again on every wake.
  if (o.body.status === 'FAILED') return DONE;
  const what = `${repo.url}${repo.branch ? ` (${repo.branch})` : ''}`;
  if (!(await transition(deps, o, 'UPLOADING', `cloning ${what}`, enabled))) return DONE;
  let got: Awaited<ReturnType<Builder['fetchGit']>>;
  try {
    got = await deps.builder.fetchGit(o.workspace, repo, signal);
  } catch (err) {
    if (err instanceof GitFetchError) throw new TerminalError(`git clone of ${what} failed: ${err.message}`);
    throw err;
  }
  const record: SourceRecord = {
    digest: got.digest,
    size: got.size,
    uploadedAt: deps.now().toISOString(),
    repository: { url: got.url, ...(got.branch ? { branch: got.branch } : {}), commit: got.commit },
  };
  await deps.resources.updateStatus(keyOf(o), {
    to: 'BUILDING',
    message: `source cloned: ${got.url} at ${got.commit} (${got.digest}, ${got.size} bytes)`,
    extras: { source: record },
    when: (cur) => enabled(cur) && !isGone(cur) && cur.body.status === 'UPLOADING',
  });
  return { requeueAfterMs: 0 };
}
