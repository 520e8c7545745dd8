// Agents and functions: source → build → revision → replicas, and status back into the store.
//   the steps every kind built from code takes (code/source.ts): policies, source (UPLOADING), build (BUILDING →
//   BUILT, a step of its own), the revisions the spec asks to run;
//   a changed revision → DEPLOYING → one replica answers on its port → DEPLOYED (the revision recorded), or FAILED
//   with the app's own output; minScale 0 lets that replica idle to standby and away afterwards (scaler.ts).
//   enabled: false → DEACTIVATED (replicas removed); DELETE → TERMINATED (replicas removed).
import { isGone } from '../../kinds/status.js';
import { ownTriggerRoutes, triggerRoutes } from '../../kinds/trigger-path.js';
import { CONNECTION_KIND } from '../../models/connections.js';
import { REFRESH_FAILED } from '../../kinds/oauth2.js';
import { oauthBindings } from '../../oauth/bindings.js';
import { ConnectionTokenFailed, type ConnectionTokens } from '../../oauth/connection-tokens.js';
import type { RuntimeDriver, VolumeMount } from '../../runtime/driver.js';
import { EVERY_WORKSPACE, keyOf, type Store, type StoredObject } from '../../store/store.js';
import { recordFailure, transition } from '../core/events.js';
import { deactivate, finishDeletion } from '../core/lifecycle-steps.js';
import type { QuotaLedger } from '../core/quota-ledger.js';
import { scaleNote } from '../core/quotas.js';
import { DONE, namedIn, type Reconciler, type ReconcileResult, TerminalError } from '../core/reconciler.js';
import { imageFields } from '../code/app.js';
import type { BuiltApp } from '../../builds/builder.js';
import {
  buildStep,
  type CodeDeps,
  enabled,
  policyStep,
  QUOTA_WAIT_MS,
  RECONCILE_AGAIN,
  type RevisionRecord,
  revisionId,
  revisionsStep,
  sourceStep,
} from '../code/source.js';
import { connectionEnvs, MissingConnectionError } from '../code/workload-policies.js';
import { unappliedWorkloadNote } from '../code/workload-unapplied.js';
import {
  attachVolumes,
  VolumeElsewhere,
  detachVolumes,
  holderName,
  type SpecVolume,
  VolumeNotReady,
} from '../volume/volume-attach.js';
import {
  ReplicaQuotaError,
  type ReplicaSet,
  ReplicaStartError,
  type RevisionRun,
  replicaIdPrefix,
  type WorkloadRoute,
  workloadKey,
} from './replicas.js';

/** How often a deployed workload is looked at again (a replica count below minScale is topped up). */
export const LIVE_RECHECK_MS = 30_000;
/** How often a workload waiting for its volume to be created looks again (a volume is made in ~50 ms). */
export const VOLUME_WAIT_MS = 200;
/** How often an agent whose volumes' data is on another node looks again (decision 102). */
export const ELSEWHERE_WAIT_MS = 2_000;

export interface DeployDeps extends CodeDeps {
  replicas: ReplicaSet;
  /** Mounts the volumes an agent's or function's replicas bind (spec.volumes). */
  driver: RuntimeDriver;
  /** The workspaces' replica slots and memory (decision 040); none: unbounded. */
  quota?: QuotaLedger;
  /** Access tokens of OAuth2 connections (decision 049); none: such connections give their replicas nothing. */
  tokens?: ConnectionTokens;
  /**
   * In a cluster, the part of a workload's scale this server runs when its replicas are placed across nodes
   * (docs/decisions/086-replicas-across-nodes.md); undefined when they are not (SQLite, a workload with volumes or
   * connections, one not placed yet): this server runs them all, as before.
   */
  replicaShare?: (o: StoredObject) => { minScale: number; maxScale: number } | undefined;
  /** In a cluster, this server's node: a volume made on another node is waited for, not mounted empty (102). */
  node?: string;
}

/** Whether the object's FAILED status came from an OAuth2 connection's refused grant (cleared when it refreshes). */
export const failedByConnection = (body: any) =>
  body?.status === 'FAILED' && String(body.events?.at(-1)?.message ?? '').startsWith(REFRESH_FAILED);

export type WorkloadKind = 'Agent' | 'Function';

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
 * The replica id prefixes of every revision an agent, function or application still serves (active and canary) whose
 * app its workspace holds (`holds`): an earlier server's replicas with one of them are re-adopted, the rest removed at
 * start (decision 029). A revision whose app is not held (built before apps were kept per workspace, decision 036) is
 * built again by its deploy; its old replicas are not kept. An application's revision is its image (decision 054):
 * kept while the revision is recorded; a replica whose sandbox no longer matches what the revision would start (its
 * image gone, its envs changed) is removed when the deploy tries to claim it (ReplicaSet.claimLeftovers).
 */
export async function wantedReplicaPrefixes(
  store: Store,
  holds: (workspace: string, app: string) => boolean,
): Promise<Set<string>> {
  const out = new Set<string>();
  for (const kind of ['Agent', 'Function', 'Application'] as const)
    for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind })) {
      // Not only DEPLOYED ones: during a redeploy (BUILDING, DEPLOYING) or after a failed one, the last deployed
      // revisions still serve, and serve on after a restart.
      if (isGone(o) || !enabled(o)) continue;
      const key = workloadKey(o.workspace, kind, o.name);
      const held = (id: string | undefined): id is string => {
        const rec = (o.body.revisions ?? []).find((r: RevisionRecord) => r.id === id);
        return !!rec && (kind === 'Application' || holds(o.workspace, rec.app));
      };
      if (held(o.body.activeRevision)) out.add(replicaIdPrefix(key, o.body.activeRevision));
      if (held(o.body.canaryRevision)) out.add(replicaIdPrefix(`${key}#canary`, o.body.canaryRevision));
    }
  return out;
}

/** The holder of an agent's or function's volumes (`agent:<name>`, `function:<name>`). */
const holderOf = (kind: WorkloadKind, name: string) =>
  holderName(kind === 'Function' ? 'function' : 'agent', name);

/** What the replica set knows of a stored agent or function. */
export const workloadOf = (kind: WorkloadKind, o: StoredObject) => ({
  workspace: o.workspace,
  kind,
  name: o.name,
  public: o.body.spec?.public === true,
  route: routeOf(o),
});

/**
 * What a revision of the object runs: its app, start command, envs (connections' and the spec's), scale (`share`: the
 * part of it one node of a cluster runs), mounts.
 */
export async function runOf(
  deps: Pick<DeployDeps, 'resources' | 'tokens'>,
  kind: WorkloadKind,
  o: StoredObject,
  app: BuiltApp,
  volumes: VolumeMount[],
  share?: { minScale: number; maxScale: number },
): Promise<RevisionRun> {
  const { resources } = deps;
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
    minScale: share?.minScale ?? open.runtime?.minScale ?? 0,
    maxScale: share?.maxScale ?? Math.max(1, open.runtime?.maxScale ?? 10),
    volumes: [...volumes, ...(oauth?.volumes ?? [])],
    ...(oauth?.egress ? { egress: oauth.egress } : {}),
  };
}

/**
 * A server restarted while the object was not DEPLOYED (a redeploy under way, or a failed one): the revisions
 * it served before the restart serve again with the earlier server's replicas, if they still run, while the new
 * one is cloned, built and deployed. Nothing is started for them (decision 029).
 */
async function readoptServing(deps: DeployDeps, kind: WorkloadKind, o: StoredObject): Promise<void> {
  const { resources, builder, replicas } = deps;
  if (o.body.status === 'DEPLOYED' || !o.body.activeRevision) return;
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
      holderOf(kind, o.name),
      o.body.spec?.volumes ?? [],
      deps.node,
    );
    const taken = await replicas.readopt(
      workloadOf(kind, o),
      await runOf(deps, kind, o, active, volumes),
      canary && percent > 0 ? { run: await runOf(deps, kind, o, canary, volumes), percent } : undefined,
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

/** Starts the revisions asked for, replacing what ran, and records them as DEPLOYED. */
async function deploy(
  deps: DeployDeps,
  kind: WorkloadKind,
  o: StoredObject,
  runs: { run: RevisionRun; canary?: { run: RevisionRun; percent: number } },
  revisions: RevisionRecord[],
  resume: boolean,
): Promise<ReconcileResult> {
  const { resources, replicas } = deps;
  const { run, canary } = runs;
  const key = keyOf(o);
  const canaryId = canary?.run.id;
  const what = canary ? `revision ${run.id}, canary ${canaryId} at ${canary.percent}%` : `revision ${run.id}`;
  if (!resume) {
    const d = await transition(deps, o, 'DEPLOYING', `deploying ${what}`, enabled);
    if (!d) return DONE;
  }
  try {
    await replicas.deploy(workloadOf(kind, o), run, canary);
  } catch (err) {
    if (err instanceof ReplicaStartError) throw new TerminalError(`${what} did not start: ${err.message}`);
    if (err instanceof ReplicaQuotaError) {
      await resources.recordEvent(key, `waiting for a replica slot: ${err.message}`);
      return { requeueAfterMs: QUOTA_WAIT_MS };
    }
    throw err;
  }
  // The replicas of the old spec are gone: a volume it named and this one does not is free again.
  const specVolumes: SpecVolume[] = o.body.spec?.volumes ?? [];
  await detachVolumes(
    resources,
    o.workspace,
    holderOf(kind, o.name),
    new Set(specVolumes.map((v) => v.name)),
  );
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
}

export function deployReconciler(deps: DeployDeps, kind: WorkloadKind): Reconciler {
  const { resources, replicas } = deps;
  return {
    // A policy or connection change re-judges (and redeploys) the workloads of its workspace at once.
    watches: [namedIn('Policy', 'policies'), namedIn(CONNECTION_KIND, 'integrationConnections')],
    async reconcile(key, signal): Promise<ReconcileResult> {
      const o = await resources.store.get(key);
      if (!o) return DONE;
      const release = async () => {
        deps.builds.forget(key);
        await replicas.remove(o.workspace, kind, o.name);
        deps.tokens?.release(workloadKey(o.workspace, kind, o.name));
        // A workload holds its volumes while it lives (its replicas through standby and scale to zero); they are
        // let go once no replica of it can write them.
        await detachVolumes(resources, o.workspace, holderOf(kind, o.name));
      };
      if (isGone(o)) return finishDeletion(deps, o, { release, message: 'terminated: replicas removed' });
      if (!enabled(o)) {
        await deactivate(deps, o, { release, message: 'deactivated: replicas removed' });
        return DONE;
      }
      const denied = await policyStep(deps, o, release);
      if (denied) return denied;
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
        return d ? RECONCILE_AGAIN : DONE;
      }
      await readoptServing(deps, kind, o);
      const source = await sourceStep(deps, o, signal);
      if (!('digest' in source)) return source;
      if (o.body.status === 'FAILED') {
        // With no replica left running (a first deploy that failed, or after a restart: FAILED replicas are not
        // re-adopted), nothing writes the volumes it claimed: another holder may take them.
        if (!replicas.get(o.workspace, kind, o.name))
          await detachVolumes(resources, o.workspace, holderOf(kind, o.name));
        return DONE;
      }
      const app = await buildStep(deps, o, source);
      if (!('key' in app)) return app;
      const { revisions, isNew, active, canary } = revisionsStep(deps, o, app, source);
      let volumes: VolumeMount[];
      try {
        // Before any replica starts: a revision never runs without the mounts its spec names. Idempotent for
        // this holder (no write once held); another holder's volume is a FAILED naming it.
        volumes = await attachVolumes(
          resources,
          deps.driver,
          o.workspace,
          holderOf(kind, o.name),
          o.body.spec?.volumes ?? [],
          deps.node,
        );
      } catch (err) {
        if (!(err instanceof VolumeNotReady)) throw err;
        await resources.recordEvent(key, `waiting: ${err.message}`);
        // Data on another node waits for a change of leader: looked at again every few seconds, not 5 times a second.
        return { requeueAfterMs: err instanceof VolumeElsewhere ? ELSEWHERE_WAIT_MS : VOLUME_WAIT_MS };
      }
      const share = deps.replicaShare?.(o);
      let run: RevisionRun;
      let canaryRun: { run: RevisionRun; percent: number } | undefined;
      try {
        run = await runOf(deps, kind, o, active, volumes, share);
        canaryRun = canary && {
          run: await runOf(deps, kind, o, canary.app, volumes, share),
          percent: canary.percent,
        };
      } catch (err) {
        if (!(err instanceof ConnectionTokenFailed)) throw err;
        // Its replicas could act for the user no longer: none serves, and calls get the reason (gateway).
        await release();
        await recordFailure(deps, key, err.message);
        return DONE;
      }
      const w = replicas.get(o.workspace, kind, o.name);
      const same =
        o.body.status === 'DEPLOYED' &&
        o.body.activeRevision === run.id &&
        o.body.canaryRevision === canaryRun?.run.id &&
        !isNew;
      // Placed across nodes: each node holding a slot runs its replicas of the deployed revisions
      // (replica-holding.ts); this one only deploys a new revision (its first replica here says whether it starts).
      if (same && share) return { requeueAfterMs: LIVE_RECHECK_MS };
      if (same && replicas.matches(w, run, canaryRun)) {
        if (w) {
          w.public = o.body.spec?.public === true;
          w.route = routeOf(o);
        }
        return { requeueAfterMs: LIVE_RECHECK_MS };
      }
      // Already DEPLOYED with these revisions, but this server has no replicas yet (it restarted): the deploy
      // re-adopts the replicas still running, or starts new ones, without leaving DEPLOYED.
      return deploy(deps, kind, o, { run, canary: canaryRun }, revisions, same && !w);
    },
  };
}
