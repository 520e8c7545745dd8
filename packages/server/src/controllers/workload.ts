// Agents and functions: source → build → revision → replicas, and status back into the store.
//   no source yet → UPLOADING (waiting for a zip: PUT ?upload=true gives the URL)
//   a source whose app is not built → BUILDING → (build sandbox) → BUILT, or FAILED with the log's last lines
//   BUILT / a changed revision → DEPLOYING → one replica answers on its port → DEPLOYED (the revision recorded),
//   or FAILED with the app's own output; minScale 0 lets that replica idle to standby and away afterwards.
//   enabled: false → DEACTIVATED (replicas removed); DELETE → TERMINATED (replicas removed).
// The source digest is written beside status by the upload route (api/code-upload.ts), or by the clone of
// spec.repository (workload-git.ts).
import { createHash } from 'node:crypto';
import { BUILD_MEMORY_MB } from '../builds/sandbox-step.js';
import {
  type BaseImage,
  BaseImageError,
  type BuiltApp,
  BuildError,
  type Builder,
} from '../builds/builder.js';
import { isGone } from '../kinds/status.js';
import { ownTriggerRoutes, triggerRoutes } from '../kinds/trigger-path.js';
import type { RuntimeDriver, VolumeMount } from '../runtime/driver.js';
import { keyOf, type Store, type StoredObject, EVERY_WORKSPACE } from '../store/store.js';
import { CONNECTION_KIND } from '../models/connections.js';
import { REFRESH_FAILED } from '../kinds/oauth2.js';
import { oauthBindings } from '../oauth/bindings.js';
import { ConnectionTokenFailed, type ConnectionTokens } from '../oauth/connection-tokens.js';
import { type ControllerDeps, recordFailure, transition } from './events.js';
import { deactivate, finishDeletion } from './lifecycle-steps.js';
import { isRefusal, type QuotaLedger } from './quota-ledger.js';
import { scaleNote } from './quotas.js';
import { DONE, type Reconciler, type ReconcileResult, TerminalError } from './reconciler.js';
import {
  ReplicaQuotaError,
  type ReplicaSet,
  ReplicaStartError,
  imageFields,
  type RevisionRun,
  replicaIdPrefix,
  type WorkloadRoute,
  workloadKey,
} from './replicas.js';
import {
  attachVolumes,
  detachVolumes,
  holderName,
  type SpecVolume,
  VolumeNotReady,
} from './volume-attach.js';
import {
  connectionEnvs,
  failedByPolicy,
  MissingConnectionError,
  workloadPolicyDenial,
} from './workload-policies.js';
import { unappliedWorkloadNote } from './workload-unapplied.js';
import { cloneStep, type SourceRecord } from './workload-git.js';

/** Look again at once: the status just changed and the next pass acts on it. */
const reconcileAgain: ReconcileResult = { requeueAfterMs: 0 };

/** Revisions listed on the object (GET .../revisions); older ones are forgotten. */
export const KEPT_REVISIONS = 5;
/** How often a deployed workload is looked at again (a replica count below minScale is topped up). */
export const LIVE_RECHECK_MS = 30_000;
/** How often a workload waiting for its volume to be created looks again (a volume is made in ~50 ms). */
export const VOLUME_WAIT_MS = 200;
/**
 * How often a workload waiting for a build slot or a replica slot of its workspace's quotas looks again: a build
 * takes tens of seconds, and a replica slot frees when a replica idles away (minutes); a second is cheap and quick.
 */
export const QUOTA_WAIT_MS = 1_000;

export type { SourceRecord } from './workload-git.js';

export interface RevisionRecord {
  id: string;
  /** The built app's key (builds/apps/<key>; its base image, if any, is recorded beside it). */
  app: string;
  source: string;
  start: string;
  createdAt: string;
}

export interface WorkloadControllerDeps extends ControllerDeps {
  builder: Builder;
  replicas: ReplicaSet;
  /** Mounts the volumes an agent's or function's replicas bind (spec.volumes). */
  driver: RuntimeDriver;
  /** A deleted job's running executions are cancelled (tasks stopped, sandboxes removed). */
  cancelExecutions?: (workspace: string, job: string) => Promise<void>;
  /** The workspaces' build slots and memory (decision 040); none: unbounded. */
  quota?: QuotaLedger;
  /** Access tokens of OAuth2 connections (decision 049); none: such connections give their replicas nothing. */
  tokens?: ConnectionTokens;
}

/** Whether the object's FAILED status came from an OAuth2 connection's refused grant (cleared when it refreshes). */
const failedByConnection = (body: any) =>
  body?.status === 'FAILED' && String(body.events?.at(-1)?.message ?? '').startsWith(REFRESH_FAILED);

const enabled = (o: StoredObject) => o.body.spec?.enabled !== false;

/** The revision id: the built app and its start command (the spec's envs and memory apply to every revision). */
export function revisionId(app: BuiltApp): string {
  return createHash('sha256')
    .update(JSON.stringify([app.key, app.plan.start]))
    .digest('hex')
    .slice(0, 12);
}

/** The routing settings of a stored agent or function (gateway/affinity.ts, gateway/request-deadlines.ts). */
export function routeOf(o: StoredObject): WorkloadRoute {
  const paths = triggerRoutes(o.kind, o.name, o.body.spec);
  return {
    stickyTtlS: o.body.spec?.revision?.stickySessionTtl,
    timeoutS: o.body.spec?.runtime?.timeout,
    paths,
    ownPaths: ownTriggerRoutes(o.kind, o.name, paths),
  };
}

/**
 * The replica id prefixes of every revision an agent or function still serves (active and canary) whose app its
 * workspace holds (`holds`): an earlier server's replicas with one of them are re-adopted, the rest removed at start
 * (decision 029). A revision whose app is not held (built before apps were kept per workspace, decision 036) is
 * built again by its deploy; its old replicas are not kept.
 */
export async function wantedReplicaPrefixes(
  store: Store,
  holds: (workspace: string, app: string) => boolean,
): Promise<Set<string>> {
  const out = new Set<string>();
  for (const kind of ['Agent', 'Function'] as const)
    for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind })) {
      // Not only DEPLOYED ones: during a redeploy (BUILDING, DEPLOYING) or after a failed one, the last deployed
      // revisions still serve, and serve on after a restart.
      if (isGone(o) || !enabled(o)) continue;
      const key = workloadKey(o.workspace, kind, o.name);
      const held = (id: string | undefined): id is string => {
        const rec = (o.body.revisions ?? []).find((r: RevisionRecord) => r.id === id);
        return !!rec && holds(o.workspace, rec.app);
      };
      if (held(o.body.activeRevision)) out.add(replicaIdPrefix(key, o.body.activeRevision));
      if (held(o.body.canaryRevision)) out.add(replicaIdPrefix(`${key}#canary`, o.body.canaryRevision));
    }
  return out;
}

export function workloadReconciler(
  deps: WorkloadControllerDeps,
  kind: 'Agent' | 'Function' | 'Job',
): Reconciler {
  const { resources, builder, replicas } = deps;

  /** The holder of this agent's or function's volumes (`agent:<name>`, `function:<name>`). */
  const holderOf = (name: string) => holderName(kind === 'Function' ? 'function' : 'agent', name);

  async function runOf(o: StoredObject, app: BuiltApp, volumes: VolumeMount[]): Promise<RevisionRun> {
    const open = resources.openSecrets(resources.kind(kind), o.body.spec ?? {});
    let fromConnections: Record<string, string>;
    try {
      fromConnections = await connectionEnvs(resources, o.workspace, open.integrationConnections);
    } catch (err) {
      if (err instanceof MissingConnectionError) throw new TerminalError(err.message);
      throw err;
    }
    const envs: Record<string, string> = { ...(app.plan.manifest?.env ?? {}), ...fromConnections };
    for (const e of open.runtime?.envs ?? []) envs[e.name] = e.value ?? '';
    const oauth = deps.tokens
      ? await oauthBindings(
          resources,
          deps.tokens,
          o.workspace,
          workloadKey(o.workspace, kind, o.name),
          open.integrationConnections,
        )
      : undefined;
    return {
      start: app.plan.start,
      memoryMb: open.runtime?.memory ?? 2048,
      envs,
      id: revisionId(app),
      appDir: app.dir,
      ...imageFields(app.base),
      minScale: open.runtime?.minScale ?? 0,
      maxScale: Math.max(1, open.runtime?.maxScale ?? 10),
      volumes: [...volumes, ...(oauth?.volumes ?? [])],
      ...(oauth?.egress ? { egress: oauth.egress } : {}),
    };
  }

  async function buildOf(o: StoredObject, source: SourceRecord, signal: AbortSignal) {
    let base: BaseImage | undefined;
    try {
      base = builder.baseImage(o.workspace, o.body.spec?.runtime?.image);
    } catch (err) {
      if (err instanceof BaseImageError) throw new TerminalError(err.message);
      throw err;
    }
    const have = builder.built(o.workspace, source.digest, base);
    if (have) return have;
    // A build sandbox (BUILD_MEMORY_MB) runs only in a slot of the workspace's quotas: the one place a build
    // starts for an object. Without one it waits, and its object says for what.
    const slot = deps.quota?.take(o.workspace, 'builds', BUILD_MEMORY_MB);
    if (slot && isRefusal(slot)) {
      await resources.recordEvent(keyOf(o), `waiting for a build slot: ${slot.message}`);
      return { requeueAfterMs: QUOTA_WAIT_MS };
    }
    try {
      const on = base ? ` on image ${base.name}` : '';
      const b = await transition(deps, o, 'BUILDING', `building ${source.digest}${on}`, enabled);
      if (!b) return undefined;
      const app = await builder.build(o.workspace, source.digest, signal, base);
      await transition(deps, o, 'BUILT', `built ${app.key}`, enabled);
      return app;
    } catch (err) {
      if (err instanceof BuildError) throw new TerminalError(`build failed: ${err.message}\n${err.logTail}`);
      throw err;
    } finally {
      slot?.release();
    }
  }

  /**
   * A server restarted while the object was not DEPLOYED (a redeploy under way, or a failed one): the revisions
   * it served before the restart serve again with the earlier server's replicas, if they still run, while the new
   * one is cloned, built and deployed. Nothing is started for them (decision 029).
   */
  async function readoptServing(o: StoredObject): Promise<void> {
    if (kind === 'Job' || o.body.status === 'DEPLOYED' || !o.body.activeRevision) return;
    if (replicas.get(o.workspace, kind, o.name)) return;
    const revisions: RevisionRecord[] = o.body.revisions ?? [];
    const appOf = (id: string | undefined) => {
      const rec = id ? revisions.find((r) => r.id === id) : undefined;
      return rec && builder.builtByKey(o.workspace, rec.app);
    };
    const active = appOf(o.body.activeRevision);
    if (!active) return;
    const canary = appOf(o.body.canaryRevision);
    const percent: number = o.body.spec?.revision?.canaryPercent ?? 0;
    try {
      // The mounts the replicas were started with (held already: no write); a spec naming other volumes since
      // no longer matches them, and the deploy that follows starts new ones.
      const volumes = await attachVolumes(
        resources,
        deps.driver,
        o.workspace,
        holderOf(o.name),
        o.body.spec?.volumes ?? [],
      );
      const taken = await replicas.readopt(
        {
          workspace: o.workspace,
          kind,
          name: o.name,
          public: o.body.spec?.public === true,
          route: routeOf(o),
        },
        await runOf(o, active, volumes),
        canary && percent > 0 ? { run: await runOf(o, canary, volumes), percent } : undefined,
      );
      if (taken)
        deps.logger?.info(
          { workspace: o.workspace, name: o.name, revision: o.body.activeRevision, status: o.body.status },
          `${kind.toLowerCase()} serves its last deployed revision again`,
        );
    } catch (err) {
      // A connection or volume gone since, a volume not ready, a grant refused: the deploy that follows reports it.
      if (
        !(err instanceof TerminalError) &&
        !(err instanceof VolumeNotReady) &&
        !(err instanceof ConnectionTokenFailed)
      )
        throw err;
    }
  }

  return {
    // A policy or connection change re-judges (and redeploys) the workloads of its workspace at once.
    watches: ['Policy', CONNECTION_KIND],
    async reconcile(key, signal): Promise<ReconcileResult> {
      const o = await resources.store.get(key);
      if (!o) return DONE;
      const release = async () => {
        await replicas.remove(o.workspace, kind, o.name);
        deps.tokens?.release(workloadKey(o.workspace, kind, o.name));
        // A workload holds its volumes while it lives (a job between executions, an agent's replicas through
        // standby and scale to zero); they are let go once no replica of it can write them.
        await detachVolumes(
          resources,
          o.workspace,
          kind === 'Job' ? holderName('job', o.name) : holderOf(o.name),
        );
      };
      if (isGone(o) && kind === 'Job') {
        const cancel = async () => {
          await deps.cancelExecutions?.(o.workspace, o.name);
          await release();
        };
        return finishDeletion(deps, o, {
          release: cancel,
          message: 'terminated: running executions cancelled',
        });
      }
      if (isGone(o)) return finishDeletion(deps, o, { release, message: 'terminated: replicas removed' });
      if (!enabled(o)) {
        await deactivate(deps, o, { release, message: 'deactivated: replicas removed' });
        return DONE;
      }
      const denied = await workloadPolicyDenial(resources, o.workspace, kind, o.body.spec);
      if (denied) {
        await release();
        await recordFailure(deps, key, denied);
        return DONE;
      }
      if (failedByPolicy(o.body)) {
        const d = await transition(deps, o, 'DEPLOYING', 'the policies allow it again; deploying', enabled);
        if (!d) return DONE;
        return reconcileAgain;
      }
      if (failedByConnection(o.body)) {
        // Deployed again once no connection of it is refused any more (the user connected again).
        for (const n of o.body.spec?.integrationConnections ?? [])
          if (await deps.tokens?.failure(o.workspace, n)) return DONE;
        const d = await transition(
          deps,
          o,
          'DEPLOYING',
          'the integration connection was replaced; deploying',
          enabled,
        );
        if (!d) return DONE;
        return reconcileAgain;
      }
      await readoptServing(o);
      const source: SourceRecord | undefined = o.body.source;
      // spec.repository (git): cloned first when it names a repository not cloned yet (workload-git.ts).
      const cloned = await cloneStep(deps, o, source, signal);
      if (cloned) return cloned;
      if (!source) {
        await resources.updateStatus(key, {
          to: 'UPLOADING',
          message:
            'waiting for code: PUT the object with ?upload=true and send a zip to the X-Blaxel-Upload-Url it answers (berth deploy does both)',
          when: (cur) => !cur.body.source && enabled(cur) && !isGone(cur),
        });
        return DONE;
      }
      if (o.body.status === 'FAILED') {
        // With no replica left running (a first deploy that failed, or after a restart: FAILED replicas are not
        // re-adopted), nothing writes the volumes it claimed: another holder may take them.
        if (kind !== 'Job' && !replicas.get(o.workspace, kind, o.name))
          await detachVolumes(resources, o.workspace, holderOf(o.name));
        return DONE;
      }
      const app = await buildOf(o, source, signal);
      if (!app) return DONE;
      if (!('key' in app)) return app;
      const now = deps.now().toISOString();
      const latest: RevisionRecord = {
        id: revisionId(app),
        app: app.key,
        source: source.digest,
        start: app.plan.start,
        createdAt: now,
      };
      const known: RevisionRecord[] = o.body.revisions ?? [];
      const isNew = !known.some((r) => r.id === latest.id);
      const revisions = isNew ? [latest, ...known].slice(0, KEPT_REVISIONS) : known;
      // A new build takes the traffic unless spec.revision.active pins an older revision (then it waits at 0%).
      const wanted = o.body.spec?.revision ?? {};
      const pick = (id: string | undefined, field: string): BuiltApp | undefined => {
        if (!id) return undefined;
        const rec = revisions.find((r) => r.id === id);
        const built = rec && builder.builtByKey(o.workspace, rec.app);
        if (!built)
          throw new TerminalError(
            `spec.revision.${field} names revision ${JSON.stringify(id)}, which is not one of the kept revisions (${revisions.map((r) => r.id).join(', ')})`,
          );
        return built;
      };
      const activeApp = pick(wanted.active, 'active') ?? app;
      const canaryPercent: number = wanted.canaryPercent ?? 0;
      const canaryApp = canaryPercent > 0 ? pick(wanted.canary, 'canary') : undefined;
      // A job has no replicas: its active revision is what each new execution's tasks run (controllers/jobs/).
      if (kind === 'Job') {
        const id = revisionId(activeApp);
        if (o.body.status === 'DEPLOYED' && o.body.activeRevision === id && !isNew) return DONE;
        await resources.updateStatus(key, {
          to: 'DEPLOYED',
          message: `deployed revision ${id}: executions run it${unappliedWorkloadNote(kind, o.body.spec)}`,
          extras: { activeRevision: id, revisions },
          when: (cur) => enabled(cur) && !isGone(cur),
        });
        return DONE;
      }
      const specVolumes: SpecVolume[] = o.body.spec?.volumes ?? [];
      let volumes: VolumeMount[];
      try {
        // Before any replica starts: a revision never runs without the mounts its spec names. Idempotent for
        // this holder (no write once held); another holder's volume is a FAILED naming it.
        volumes = await attachVolumes(resources, deps.driver, o.workspace, holderOf(o.name), specVolumes);
      } catch (err) {
        if (!(err instanceof VolumeNotReady)) throw err;
        await resources.recordEvent(keyOf(o), `waiting: ${err.message}`);
        return { requeueAfterMs: VOLUME_WAIT_MS };
      }
      let run: RevisionRun;
      let canaryRun: { run: RevisionRun; percent: number } | undefined;
      try {
        run = await runOf(o, activeApp, volumes);
        canaryRun = canaryApp && { run: await runOf(o, canaryApp, volumes), percent: canaryPercent };
      } catch (err) {
        if (!(err instanceof ConnectionTokenFailed)) throw err;
        // Its replicas could act for the user no longer: none serves, and calls get the reason (gateway).
        await release();
        await recordFailure(deps, key, err.message);
        return DONE;
      }
      const w = replicas.get(o.workspace, kind, o.name);
      const canaryId = canaryRun?.run.id;
      if (
        o.body.status === 'DEPLOYED' &&
        o.body.activeRevision === run.id &&
        o.body.canaryRevision === canaryId &&
        !isNew &&
        replicas.matches(w, run, canaryRun)
      ) {
        if (w) {
          w.public = o.body.spec?.public === true;
          w.route = routeOf(o);
        }
        return { requeueAfterMs: LIVE_RECHECK_MS };
      }
      const what = canaryRun
        ? `revision ${run.id}, canary ${canaryId} at ${canaryPercent}%`
        : `revision ${run.id}`;
      // Already DEPLOYED with these revisions, but this server has no replicas yet (it restarted): the deploy
      // re-adopts the replicas still running, or starts new ones, without leaving DEPLOYED.
      const resume =
        o.body.status === 'DEPLOYED' &&
        o.body.activeRevision === run.id &&
        o.body.canaryRevision === canaryId &&
        !isNew &&
        !w;
      if (!resume) {
        const d = await transition(deps, o, 'DEPLOYING', `deploying ${what}`, enabled);
        if (!d) return DONE;
      }
      try {
        await replicas.deploy(
          {
            workspace: o.workspace,
            kind,
            name: o.name,
            public: o.body.spec?.public === true,
            route: routeOf(o),
          },
          run,
          canaryRun,
        );
      } catch (err) {
        if (err instanceof ReplicaStartError)
          throw new TerminalError(`${what} did not start: ${err.message}`);
        if (err instanceof ReplicaQuotaError) {
          await resources.recordEvent(key, `waiting for a replica slot: ${err.message}`);
          return { requeueAfterMs: QUOTA_WAIT_MS };
        }
        throw err;
      }
      // The replicas of the old spec are gone: a volume it named and this one does not is free again.
      await detachVolumes(resources, o.workspace, holderOf(o.name), new Set(specVolumes.map((v) => v.name)));
      const capped = deps.quota ? scaleNote(deps.quota.limits(o.workspace), run.maxScale, run.memoryMb) : '';
      const done = await resources.updateStatus(key, {
        to: 'DEPLOYED',
        message: `deployed ${what}${unappliedWorkloadNote(kind, o.body.spec)}${capped}`,
        extras: { activeRevision: run.id, canaryRevision: canaryId, revisions },
        when: (cur) => enabled(cur) && cur.body.status === (resume ? 'DEPLOYED' : 'DEPLOYING'),
      });
      if (!done) return DONE;
      deps.logger?.info(
        { workspace: o.workspace, name: o.name, revision: run.id },
        `${kind.toLowerCase()} deployed`,
      );
      return { requeueAfterMs: LIVE_RECHECK_MS };
    },
  };
}
