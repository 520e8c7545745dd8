// Applications (decision 054): the agents' replica set runs an image of the workspace as it is (its Entrypoint and
// Cmd, Env, WorkingDir, User: runtime/linux/create.ts), listening on spec.port, with the spec's envs and memory.
//   a changed image (by id), port or start → a new revision, kept (KEPT_REVISIONS) → DEPLOYING → a replica listens
//   → DEPLOYED; an image the workspace lacks, or one with no Entrypoint/Cmd, → FAILED saying how to fix it.
//   bound to a sandbox (kinds/application.ts boundSandbox): nothing runs; DEPLOYED once the sandbox exists in the
//   workspace, FAILED naming it when it does not (the gateway then answers 404, gateway/applications.ts).
//   enabled: false → DEACTIVATED (replicas removed); DELETE → TERMINATED (replicas removed).
import { createHash } from 'node:crypto';
import { startOf } from '../../builds/dockerfile/workload.js';
import {
  APPLICATION_MAX_SCALE,
  APPLICATION_MEMORY_MB,
  APPLICATION_MIN_SCALE,
  APPLICATION_PORT,
  boundSandbox,
} from '../../kinds/application.js';
import { isGone } from '../../kinds/status.js';
import type { ImageStore } from '../../runtime/images/image-store.js';
import { keyOf, type StoredObject } from '../../store/store.js';
import { appPath } from '../code/app.js';
import { enabled, KEPT_REVISIONS, QUOTA_WAIT_MS } from '../code/source.js';
import { type ControllerDeps, recordFailure, transition } from '../core/events.js';
import { deactivate, finishDeletion } from '../core/lifecycle-steps.js';
import type { QuotaLedger } from '../core/quota-ledger.js';
import { scaleNote } from '../core/quotas.js';
import { DONE, type Reconciler, type ReconcileResult, TerminalError } from '../core/reconciler.js';
import { LIVE_RECHECK_MS } from './deploy.js';
import { ReplicaQuotaError, type ReplicaSet, ReplicaStartError, type RevisionRun } from './replicas.js';

export const APPLICATION_KIND = 'Application';

export interface ApplicationDeps extends ControllerDeps {
  replicas: ReplicaSet;
  images: Pick<ImageStore, 'find' | 'markDeployed'>;
  quota?: QuotaLedger;
  /**
   * In a cluster, the part of a placed application's scale this node runs (decision 086, as for agents); undefined
   * on SQLite and for an application not placed yet.
   */
  replicaShare?: (o: StoredObject) => { minScale: number; maxScale: number } | undefined;
}

/** One kept revision of an application (APPLICATION_READ_ONLY.revisions). */
export interface AppRevisionRecord {
  id: string;
  /** The image as the spec named it, and the content it stood for then. */
  image: string;
  imageId: string;
  start: string;
  port: number;
  memory: number;
  createdAt: string;
}

/** What makes a revision: the image's content, its start command and the port (envs and memory apply to all). */
const revisionIdOf = (imageId: string, start: string, port: number) =>
  createHash('sha256')
    .update(JSON.stringify([imageId, start, port]))
    .digest('hex')
    .slice(0, 12);

/** The revision the spec's image stands for now, or a TerminalError saying why it cannot run. */
function latestRevision(deps: ApplicationDeps, o: StoredObject): AppRevisionRecord {
  const spec = o.body.spec ?? {};
  const name: string = spec.image;
  const image = deps.images.find(o.workspace, name);
  if (!image)
    throw new TerminalError(
      `image ${name} is not in this workspace's images: pull it (berth image pull ${name}), import it or build it, then update the application`,
    );
  const start = startOf(image, undefined);
  if (!start)
    throw new TerminalError(
      `image ${name} has no ENTRYPOINT or CMD: an application runs its image's command`,
    );
  deps.images.markDeployed(o.workspace, image.id);
  const port: number = spec.port ?? APPLICATION_PORT;
  return {
    id: revisionIdOf(image.id, start, port),
    image: name,
    imageId: image.id,
    start,
    port,
    memory: spec.memory ?? APPLICATION_MEMORY_MB,
    createdAt: deps.now().toISOString(),
  };
}

/** What a kept revision runs, with the spec's envs (secrets opened) and memory; `share` is this node's scale. */
function runOf(
  deps: Pick<ApplicationDeps, 'resources' | 'images'>,
  o: StoredObject,
  rec: AppRevisionRecord,
  share?: { minScale: number; maxScale: number },
): RevisionRun {
  const open = deps.resources.openSecrets(deps.resources.kind(APPLICATION_KIND), o.body.spec ?? {});
  const envs: Record<string, string> = {};
  for (const e of open.envs ?? []) envs[e.name] = e.value ?? '';
  const image = deps.images.find(o.workspace, rec.imageId);
  if (!image)
    throw new TerminalError(`revision ${rec.id}: its image ${rec.image} is no longer in this workspace`);
  const path = image.config.env.find((e) => e.startsWith('PATH='))?.slice('PATH='.length);
  return {
    id: rec.id,
    appDir: '',
    image: image.id,
    // The image's PATH when it sets one (nothing of /app is bound for an image run as it is).
    path: path ?? appPath().split(':').slice(2).join(':'),
    start: rec.start,
    memoryMb: o.body.spec?.memory ?? APPLICATION_MEMORY_MB,
    envs,
    minScale: share?.minScale ?? APPLICATION_MIN_SCALE,
    maxScale: share?.maxScale ?? APPLICATION_MAX_SCALE,
    volumes: [],
    port: rec.port,
  };
}

/**
 * What a node holding slots of a placed application runs (replica-holding.ts): its deployed revisions with the
 * node's `share`; undefined while the revision's image is not on this node yet (images ahead copies it).
 */
export function placedApplicationRuns(
  deps: Pick<ApplicationDeps, 'resources' | 'images'>,
  o: StoredObject,
  share: { minScale: number; maxScale: number },
): { run: RevisionRun; canary?: { run: RevisionRun; percent: number } } | undefined {
  const known: AppRevisionRecord[] = o.body.revisions ?? [];
  const of = (id: unknown) => known.find((r) => r.id === id);
  const active = of(o.body.activeRevision);
  const percent: number = o.body.spec?.revision?.canaryPercent ?? 0;
  const canary = percent > 0 ? of(o.body.canaryRevision) : undefined;
  if (!active || (percent > 0 && !canary)) return undefined;
  for (const r of [active, canary]) if (r && !deps.images.find(o.workspace, r.imageId)) return undefined;
  return {
    run: runOf(deps, o, active, share),
    ...(canary ? { canary: { run: runOf(deps, o, canary, share), percent } } : {}),
  };
}

export const applicationWorkload = (o: StoredObject) => ({
  workspace: o.workspace,
  kind: APPLICATION_KIND as 'Application',
  name: o.name,
  // Applications are public (the service's rule): their URL answers anyone, like a public agent's.
  public: true,
  route: { stickyTtlS: o.body.spec?.revision?.stickySessionTtl },
});

/** The revisions kept with `latest` among them, and those the spec asks to run (revision.active, canary). */
function revisionsOf(o: StoredObject, latest: AppRevisionRecord) {
  const known: AppRevisionRecord[] = o.body.revisions ?? [];
  const isNew = !known.some((r) => r.id === latest.id);
  const revisions = isNew ? [latest, ...known].slice(0, KEPT_REVISIONS) : known;
  const wanted = o.body.spec?.revision ?? {};
  const pick = (id: string | undefined, field: string) => {
    if (!id) return undefined;
    const rec = revisions.find((r) => r.id === id);
    if (!rec)
      throw new TerminalError(
        `spec.revision.${field} names revision ${JSON.stringify(id)}, which is not one of the kept revisions (${revisions.map((r) => r.id).join(', ')})`,
      );
    return rec;
  };
  const active = pick(wanted.active, 'active') ?? latest;
  const percent: number = wanted.canaryPercent ?? 0;
  const canary = percent > 0 ? pick(wanted.canary, 'canary') : undefined;
  return { revisions, isNew, active, canary: canary && { rec: canary, percent } };
}

async function reconcileBound(
  deps: ApplicationDeps,
  o: StoredObject,
  sandbox: string,
): Promise<ReconcileResult> {
  const { resources, replicas } = deps;
  await replicas.remove(o.workspace, APPLICATION_KIND, o.name);
  const exists = await resources.store.get({
    kind: 'Sandbox',
    workspace: o.workspace,
    parent: '',
    name: sandbox,
  });
  if (!exists || isGone(exists)) {
    if (o.body.status !== 'FAILED')
      await recordFailure(
        deps,
        keyOf(o),
        `sandbox ${JSON.stringify(sandbox)} does not exist in this workspace`,
      );
    return { requeueAfterMs: LIVE_RECHECK_MS };
  }
  const message = `bound to sandbox ${sandbox}, port ${o.body.spec?.port ?? APPLICATION_PORT}`;
  const last = o.body.events?.at(-1)?.message;
  if (o.body.status !== 'DEPLOYED' || last !== message)
    await resources.updateStatus(keyOf(o), {
      to: 'DEPLOYED',
      message,
      extras: { activeRevision: undefined, canaryRevision: undefined },
      when: (cur) => enabled(cur) && !isGone(cur),
    });
  return { requeueAfterMs: LIVE_RECHECK_MS };
}

export function applicationReconciler(deps: ApplicationDeps): Reconciler {
  const { resources, replicas } = deps;
  return {
    // A sandbox bound to an application that comes or goes changes what its address reaches.
    watches: ['Sandbox'],
    async reconcile(key): Promise<ReconcileResult> {
      const o = await resources.store.get(key);
      if (!o) return DONE;
      const release = () => replicas.remove(o.workspace, APPLICATION_KIND, o.name);
      if (isGone(o)) return finishDeletion(deps, o, { release, message: 'terminated: replicas removed' });
      if (!enabled(o)) {
        await deactivate(deps, o, { release, message: 'deactivated: replicas removed' });
        return DONE;
      }
      const bound = boundSandbox(o.body.spec);
      if (bound !== undefined) return reconcileBound(deps, o, bound);
      // A failed image or start is tried again by the next write of the spec (resources.ts: FAILED → DEPLOYING).
      if (o.body.status === 'FAILED') return DONE;
      let latest: AppRevisionRecord;
      let picked: ReturnType<typeof revisionsOf>;
      let run: RevisionRun;
      let canary: { run: RevisionRun; percent: number } | undefined;
      const share = deps.replicaShare?.(o);
      try {
        latest = latestRevision(deps, o);
        picked = revisionsOf(o, latest);
        run = runOf(deps, o, picked.active, share);
        canary = picked.canary && {
          run: runOf(deps, o, picked.canary.rec, share),
          percent: picked.canary.percent,
        };
      } catch (err) {
        if (!(err instanceof TerminalError)) throw err;
        await release();
        await recordFailure(deps, key, err.message);
        return DONE;
      }
      const w = replicas.get(o.workspace, APPLICATION_KIND, o.name);
      const same =
        o.body.status === 'DEPLOYED' &&
        o.body.activeRevision === run.id &&
        o.body.canaryRevision === canary?.run.id &&
        !picked.isNew;
      // Placed across nodes: each node holding a slot runs its replicas of the deployed revisions
      // (replica-holding.ts); this one only deploys a new revision (its first replica here says whether it starts).
      if (same && share) return { requeueAfterMs: LIVE_RECHECK_MS };
      if (same && replicas.matches(w, run, canary)) return { requeueAfterMs: LIVE_RECHECK_MS };
      const what = canary
        ? `revision ${run.id}, canary ${canary.run.id} at ${canary.percent}%`
        : `revision ${run.id}`;
      if (!same) {
        const d = await transition(
          deps,
          o,
          'DEPLOYING',
          `deploying ${what} (image ${picked.active.image})`,
          enabled,
        );
        if (!d) return DONE;
      }
      try {
        await replicas.deploy(applicationWorkload(o), run, canary);
      } catch (err) {
        if (err instanceof ReplicaStartError) {
          await recordFailure(deps, key, `${what} did not start: ${err.message}`);
          return DONE;
        }
        if (err instanceof ReplicaQuotaError) {
          await resources.recordEvent(key, `waiting for a replica slot: ${err.message}`);
          return { requeueAfterMs: QUOTA_WAIT_MS };
        }
        throw err;
      }
      const capped = deps.quota ? scaleNote(deps.quota.limits(o.workspace), run.maxScale, run.memoryMb) : '';
      await resources.updateStatus(key, {
        to: 'DEPLOYED',
        message: `deployed ${what}${capped}`,
        extras: { activeRevision: run.id, canaryRevision: canary?.run.id, revisions: picked.revisions },
        when: (cur) => enabled(cur) && cur.body.status === (same ? 'DEPLOYED' : 'DEPLOYING'),
      });
      return { requeueAfterMs: LIVE_RECHECK_MS };
    },
  };
}
