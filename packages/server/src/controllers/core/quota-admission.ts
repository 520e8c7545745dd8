// The quota admission (decision 040), which the store pipeline asks about every create and replace (Kubernetes'
// ResourceQuota admission, in small). A new sandbox is judged inside its create's transaction, against the
// workspace's sandboxes as the transaction sees them and the replicas, builds and tasks the ledger holds: two creates
// racing are serialised by the store, and neither can pass on a count the other changed. An agent, function or job
// whose spec can never run under the limits is refused at once; what only has to wait (a replica beyond what fits
// now, a task, a build) is the controllers' to hold back.
import type { ResourcesOptions } from '../../store/resources.js';
import type { ResourceKey, WriteOp } from '../../store/store.js';
import type { QuotaLedger } from './quota-ledger.js';
import {
  judge,
  quotaExceeded,
  sandboxMemoryMb,
  withSandboxUse,
  scaledSpecRefusal,
  taskMemoryRefusal,
} from './quotas.js';

export type Admit = NonNullable<ResourcesOptions['admit']>;

export function quotaAdmission(ledger: QuotaLedger): Admit {
  return (kd, key, body, prev) => {
    const limits = ledger.limits(key.workspace);
    const rt = body.spec?.runtime;
    const was = prev?.body.spec?.runtime;
    switch (kd.kind) {
      case 'Sandbox':
        // Memory is immutable and a sandbox counts until TERMINATED, so only a new one changes the use.
        return prev ? [] : [sandboxCheck(ledger, key, body)];
      case 'Agent':
      case 'Function': {
        if (prev && rt?.memory === was?.memory && rt?.minScale === was?.minScale) return [];
        const r = scaledSpecRefusal(key.workspace, limits, kd.kind, rt);
        if (r) throw quotaExceeded(r, r.errors);
        return [];
      }
      case 'Job': {
        if (prev && rt?.memory === was?.memory) return [];
        const r = taskMemoryRefusal(key.workspace, limits, rt?.memory ?? 0, 'spec.runtime.memory');
        if (r)
          throw quotaExceeded(r, [
            { pointer: '/spec/runtime/memory', message: `exceeds the memory quota (${limits.memoryMb} MB)` },
          ]);
        return [];
      }
      default:
        return [];
    }
  };
}

/**
 * The check written with a sandbox's create: the workspace's other sandboxes and what runs, plus this one. In a
 * cluster what the other nodes run is read in the create's transaction, under the workspace's quota lock that their
 * admissions take (decision 092), not taken from the copy read every second: a replica admitted on another node a
 * moment before counts, and none is admitted there between this judgement and the commit.
 */
function sandboxCheck(ledger: QuotaLedger, key: ResourceKey, body: any): WriteOp {
  const locked = ledger.lockedReads(key.workspace);
  return {
    op: 'check',
    list: { kind: 'Sandbox', workspace: key.workspace },
    ...(locked ? { reads: locked.reads } : {}),
    judge: (objects, rows) => {
      const use = withSandboxUse(
        ledger.running(key.workspace, undefined, locked && rows ? locked.groups(rows) : undefined),
        objects.filter((o) => o.name !== key.name || o.parent !== key.parent),
      );
      const refusal = judge(key.workspace, ledger.limits(key.workspace), use, {
        quota: 'sandboxes',
        askMb: sandboxMemoryMb(body) ?? 0,
        noun: 'this sandbox',
        fix: 'Delete a sandbox (a deactivated or failed one counts until it is TERMINATED) or ask for less memory (spec.runtime.memory)',
      });
      if (refusal) throw quotaExceeded(refusal);
    },
  };
}
