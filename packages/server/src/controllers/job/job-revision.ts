// Jobs: source → build → the revision each new execution's tasks run, and status back into the store.
//   the steps every kind built from code takes (code/source.ts): policies, source (UPLOADING), build (BUILDING →
//   BUILT, a step of its own), the revision the spec asks to run;
//   → DEPLOYED with that revision recorded (a job has no replicas: its executions start tasks, job-runner.ts).
//   enabled: false → DEACTIVATED; DELETE → TERMINATED, its running executions cancelled first.
import { isGone } from '../../kinds/status.js';
import { CONNECTION_KIND } from '../../models/connections.js';
import { deactivate, finishDeletion } from '../core/lifecycle-steps.js';
import { DONE, namedIn, type Reconciler, type ReconcileResult } from '../core/reconciler.js';
import {
  buildStep,
  type CodeDeps,
  enabled,
  policyStep,
  revisionId,
  revisionsStep,
  sourceStep,
} from '../code/source.js';
import { unappliedWorkloadNote } from '../code/workload-unapplied.js';
import { detachVolumes, holderName } from '../volume/volume-attach.js';

export interface JobRevisionDeps extends CodeDeps {
  /** A deleted job's running executions are cancelled (tasks stopped, sandboxes removed). */
  cancelExecutions?: (workspace: string, job: string) => Promise<void>;
}

export function jobRevisionReconciler(deps: JobRevisionDeps): Reconciler {
  const { resources } = deps;
  return {
    // A policy or connection change re-judges the jobs of its workspace at once.
    watches: [namedIn('Policy', 'policies'), namedIn(CONNECTION_KIND, 'integrationConnections')],
    async reconcile(key, signal): Promise<ReconcileResult> {
      const o = await resources.store.get(key);
      if (!o) return DONE;
      // A job holds its volumes while it lives, between executions too; they are let go once no task can write them.
      const release = async () => {
        deps.builds.forget(key);
        await detachVolumes(resources, o.workspace, holderName('job', o.name));
      };
      if (isGone(o)) {
        const cancel = async () => {
          await deps.cancelExecutions?.(o.workspace, o.name);
          await release();
        };
        return finishDeletion(deps, o, {
          release: cancel,
          message: 'terminated: running executions cancelled',
        });
      }
      if (!enabled(o)) {
        await deactivate(deps, o, { release, message: 'deactivated: replicas removed' });
        return DONE;
      }
      const denied = await policyStep(deps, o, release);
      if (denied) return denied;
      const source = await sourceStep(deps, o, signal);
      if (!('digest' in source)) return source;
      if (o.body.status === 'FAILED') return DONE;
      const app = await buildStep(deps, o, source);
      if (!('key' in app)) return app;
      const { revisions, isNew, active } = revisionsStep(deps, o, app, source);
      const id = revisionId(active);
      if (o.body.status === 'DEPLOYED' && o.body.activeRevision === id && !isNew) return DONE;
      await resources.updateStatus(key, {
        to: 'DEPLOYED',
        message: `deployed revision ${id}: executions run it${unappliedWorkloadNote('Job', o.body.spec)}`,
        extras: { activeRevision: id, revisions },
        when: (cur) => enabled(cur) && !isGone(cur),
      });
      return DONE;
    },
  };
}
