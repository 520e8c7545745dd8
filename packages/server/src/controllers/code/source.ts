// The steps every kind built from code takes from its spec to the revisions it runs, for the deploy reconciler of
// agents and functions (workload/deploy.ts) and the revision reconciler of jobs (job/job-revision.ts) alike:
//   its policies let it run here (else FAILED, and back when they allow it again);
//   a source: cloned from spec.repository (workload-git.ts), or UPLOADING until a zip is uploaded;
//   an app built from it (BUILDING → BUILT, a step of its own: build-step.ts), or FAILED with the log's last lines;
//   the revisions kept, and which of them the spec asks to run (spec.revision.active and canary).
import { createHash } from 'node:crypto';
import {
  type BaseImage,
  BaseImageError,
  type BuiltApp,
  BuildError,
  type Builder,
} from '../../builds/builder.js';
import { isGone } from '../../kinds/status.js';
import { keyOf, type StoredObject } from '../../store/store.js';
import { type ControllerDeps, recordFailure, transition } from '../core/events.js';
import { DONE, type ReconcileResult, TerminalError } from '../core/reconciler.js';
import type { BuildSteps } from './build-step.js';
import { cloneStep, type SourceRecord } from './workload-git.js';
import { failedByPolicy, workloadPolicyDenial } from './workload-policies.js';

export type { SourceRecord } from './workload-git.js';

/** Revisions listed on the object (GET .../revisions); older ones are forgotten. */
export const KEPT_REVISIONS = 5;
/**
 * How often an object waiting for a build slot or a replica slot of its workspace's quotas looks again: a build
 * takes tens of seconds, and a replica slot frees when a replica idles away (minutes); a second is cheap and quick.
 */
export const QUOTA_WAIT_MS = 1_000;
/** Look again at once: the status just changed and the next pass acts on it. */
export const RECONCILE_AGAIN: ReconcileResult = { requeueAfterMs: 0 };

export interface RevisionRecord {
  id: string;
  /** The built app's key (builds/apps/<key>; its base image, if any, is recorded beside it). */
  app: string;
  source: string;
  start: string;
  createdAt: string;
  /**
   * The digest of the built app's archive, recorded at its build (decision 094): a node of a cluster copying the app
   * keeps a copy only with these bytes. Absent for a revision built before, and for a Dockerfile app.
   */
  appDigest?: string;
}

export interface CodeDeps extends ControllerDeps {
  builder: Pick<Builder, 'baseImage' | 'built' | 'builtByKey' | 'keyOf' | 'fetchGit'>;
  builds: BuildSteps;
}

export const enabled = (o: StoredObject) => o.body.spec?.enabled !== false;

/** The revision id: the built app and its start command (the spec's envs and memory apply to every revision). */
export function revisionId(app: BuiltApp): string {
  return createHash('sha256')
    .update(JSON.stringify([app.key, app.plan.start]))
    .digest('hex')
    .slice(0, 12);
}

/**
 * Whether the object's policies let it run: when they do not, `release` frees what runs and it is FAILED naming
 * the policy; one FAILED by its policies deploys again once they allow it. A result means: stop here.
 */
export async function policyStep(
  deps: ControllerDeps,
  o: StoredObject,
  release: () => Promise<void>,
): Promise<ReconcileResult | undefined> {
  const denied = await workloadPolicyDenial(deps.resources, o.workspace, o.kind, o.body.spec);
  if (denied) {
    await release();
    await recordFailure(deps, keyOf(o), denied);
    return DONE;
  }
  if (!failedByPolicy(o.body)) return undefined;
  const d = await transition(deps, o, 'DEPLOYING', 'the policies allow it again; deploying', enabled);
  return d ? RECONCILE_AGAIN : DONE;
}

/**
 * The object's source: cloned first when spec.repository names one not cloned yet; UPLOADING (and a result) while
 * there is none. The source digest is written beside status by the upload route (api/code-upload.ts) or the clone.
 */
export async function sourceStep(
  deps: CodeDeps,
  o: StoredObject,
  signal: AbortSignal,
): Promise<SourceRecord | ReconcileResult> {
  const source: SourceRecord | undefined = o.body.source;
  const cloned = await cloneStep(deps, o, source, signal);
  if (cloned) return cloned;
  if (source) return source;
  await deps.resources.updateStatus(keyOf(o), {
    to: 'UPLOADING',
    message:
      'waiting for code: PUT the object with ?upload=true and send a zip to the X-Blaxel-Upload-Url it answers (berth deploy does both)',
    when: (cur) => !cur.body.source && enabled(cur) && !isGone(cur),
  });
  return DONE;
}

/**
 * The app built from `source` on the spec's image: at once when built before; else its build is asked for (a step
 * of its own, build-step.ts) and the object is BUILDING (or says what slot it waits for) until the build wakes it
 * again; then BUILT, or FAILED with the build log's last lines. A result means: stop here.
 */
export async function buildStep(
  deps: CodeDeps,
  o: StoredObject,
  source: SourceRecord,
): Promise<BuiltApp | ReconcileResult> {
  const { builder, builds } = deps;
  let base: BaseImage | undefined;
  try {
    base = builder.baseImage(o.workspace, o.body.spec?.runtime?.image);
  } catch (err) {
    if (err instanceof BaseImageError) throw new TerminalError(err.message);
    throw err;
  }
  const key = keyOf(o);
  const have = builder.built(o.workspace, source.digest, base);
  if (have) {
    // Built for this object since it asked: it says so (an app built before, or for another object, says nothing).
    if (builds.outcome(key, have.key)?.state === 'built')
      await transition(deps, o, 'BUILT', `built ${have.key}`, enabled);
    return have;
  }
  const state = builds.request(key, source.digest, base);
  switch (state.state) {
    case 'built':
      await transition(deps, o, 'BUILT', `built ${state.app.key}`, enabled);
      return state.app;
    case 'failed': {
      const err = state.error;
      if (err instanceof BuildError) throw new TerminalError(`build failed: ${err.message}\n${err.logTail}`);
      throw err;
    }
    case 'running': {
      const on = base ? ` on image ${base.name}` : '';
      await transition(deps, o, 'BUILDING', `building ${source.digest}${on}`, enabled);
      return DONE;
    }
    case 'waiting':
      // A build slot of the workspace's quotas: the object says what it waits for, and looks again. The server's own
      // slots need no look: the build's start wakes it.
      if (!state.quota) return DONE;
      await deps.resources.recordEvent(key, `waiting for a build slot: ${state.quota}`);
      return { requeueAfterMs: QUOTA_WAIT_MS };
  }
}

/** The revisions an object keeps with `app` among them, and those of them its spec asks to run. */
export interface Revisions {
  revisions: RevisionRecord[];
  /** `app` is a revision the object did not have. */
  isNew: boolean;
  /** What takes the traffic: `app`, unless spec.revision.active pins an older revision (the new one waits at 0%). */
  active: BuiltApp;
  /** spec.revision.canary at its canaryPercent (none at 0%). */
  canary?: { app: BuiltApp; percent: number };
}

/** Throws TerminalError when the spec names a revision that is not kept. */
export function revisionsStep(
  deps: CodeDeps,
  o: StoredObject,
  app: BuiltApp,
  source: SourceRecord,
): Revisions {
  const latest: RevisionRecord = {
    id: revisionId(app),
    app: app.key,
    source: source.digest,
    start: app.plan.start,
    createdAt: deps.now().toISOString(),
    ...(app.archive ? { appDigest: app.archive } : {}),
  };
  const known: RevisionRecord[] = o.body.revisions ?? [];
  const isNew = !known.some((r) => r.id === latest.id);
  const revisions = isNew ? [latest, ...known].slice(0, KEPT_REVISIONS) : known;
  const wanted = o.body.spec?.revision ?? {};
  const pick = (id: string | undefined, field: string): BuiltApp | undefined => {
    if (!id) return undefined;
    const rec = revisions.find((r) => r.id === id);
    const built = rec && deps.builder.builtByKey(o.workspace, rec.app);
    if (!built)
      throw new TerminalError(
        `spec.revision.${field} names revision ${JSON.stringify(id)}, which is not one of the kept revisions (${revisions.map((r) => r.id).join(', ')})`,
      );
    return built;
  };
  const active = pick(wanted.active, 'active') ?? app;
  const percent: number = wanted.canaryPercent ?? 0;
  const canaryApp = percent > 0 ? pick(wanted.canary, 'canary') : undefined;
  return { revisions, isNew, active, ...(canaryApp ? { canary: { app: canaryApp, percent } } : {}) };
}
