// Model endpoints: DEPLOYING -> DEPLOYED once the first integration connection exists, is an LLM provider
// of the model's wire format and holds a key; FAILED with the reason otherwise. The provider is never
// called here, so a laptop offline still deploys. A change to a connection or policy of the workspace
// re-judges its models at once; the periodic re-checks remain as a backstop.
import { CONNECTION_KIND, openConnection } from '../../models/connections.js';
import { locationDenial, type PolicyBody } from '../../models/policies.js';
import { providerFor } from '../../models/providers/index.js';
import { isGone } from '../../kinds/status.js';
import { type ControllerDeps, recordFailure, stillDeploying, transition } from '../core/events.js';
import { deactivate, finishDeletion } from '../core/lifecycle-steps.js';
import { DONE, namedIn, type Reconciler, type ReconcileResult } from '../core/reconciler.js';

/** How soon a FAILED model is re-judged: quick enough that creating the missing connection feels immediate. */
export const FAILED_RECHECK_MS = 5_000;
/** Backstop re-judging of a DEPLOYED model (a connection change already wakes it; see `watches`). */
export const DEPLOYED_RECHECK_MS = 30_000;

/** Why the model cannot serve, or how DEPLOYED should read. */
async function judge(
  deps: ControllerDeps,
  workspace: string,
  spec: any,
): Promise<{ problem?: string; message?: string }> {
  const { resources } = deps;
  const type = spec.runtime?.type;
  const provider = providerFor(type);
  if (!provider) return { problem: `runtime.type ${JSON.stringify(type)} is not a known provider type` };
  const names: string[] = spec.integrationConnections ?? [];
  if (!names.length)
    return { problem: 'spec.integrationConnections names no connection holding the provider credential' };
  const first = await openConnection(resources, workspace, names[0]);
  if (!first.ok) return { problem: first.reason };
  if (first.provider.wire !== provider.wire)
    return {
      problem: `integration connection ${JSON.stringify(names[0])} is a ${first.connection.integration} connection; runtime.type ${type} needs one speaking the ${provider.wire} API`,
    };
  const policies: PolicyBody[] = [];
  for (const n of spec.policies ?? []) {
    const p = await resources.get(resources.kind('Policy'), workspace, [], n);
    if (!p) return { problem: `policy ${JSON.stringify(n)} does not exist` };
    policies.push(p.body as PolicyBody);
  }
  const denied = locationDenial(policies, resources.regions);
  if (denied) return { problem: denied };
  const fallbacks = names.slice(1);
  const missing: string[] = [];
  for (const n of fallbacks) if (!(await openConnection(resources, workspace, n)).ok) missing.push(n);
  const via = `${first.connection.integration} connection ${names[0]}`;
  const fb = fallbacks.length ? `; fallbacks: ${fallbacks.join(', ')}` : '';
  const skip = missing.length ? ` (${missing.join(', ')} unusable, skipped)` : '';
  return {
    message: `deployed: serving ${spec.runtime?.model ?? 'the requested model'} through ${via}${fb}${skip}`,
  };
}

export function modelReconciler(deps: ControllerDeps): Reconciler {
  return {
    // What makes a model usable or not lives in these: a deleted connection turns it FAILED at once.
    watches: [namedIn(CONNECTION_KIND, 'integrationConnections'), namedIn('Policy', 'policies')],
    async reconcile(key): Promise<ReconcileResult> {
      const o = await deps.resources.store.get(key);
      if (!o) return DONE;
      if (isGone(o)) return finishDeletion(deps, o);
      const spec = o.body.spec ?? {};
      if (spec.enabled === false) {
        await deactivate(deps, o, { message: 'deactivated: the gateway refuses calls' });
        return DONE;
      }
      const verdict = await judge(deps, key.workspace, spec);
      if (verdict.problem) {
        await recordFailure(deps, key, verdict.problem);
        return { requeueAfterMs: FAILED_RECHECK_MS };
      }
      if (o.body.status !== 'DEPLOYED') {
        const d = await transition(
          deps,
          o,
          'DEPLOYING',
          o.body.status === 'FAILED' ? 'the earlier problem is gone; deploying again' : 'deploying',
        );
        if (d) await transition(deps, d, 'DEPLOYED', verdict.message ?? 'deployed', stillDeploying);
      }
      return { requeueAfterMs: DEPLOYED_RECHECK_MS };
    },
  };
}
