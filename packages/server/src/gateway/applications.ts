// An application's address (decision 054): an application that runs an image is served by the replica set like an
// agent (workloads.ts); one bound to a sandbox (`bind-to-sandbox`, `proxy: true`) reaches that sandbox's spec.port.
// The sandbox is looked up in the application's own workspace only: a name of another workspace's sandbox is a
// sandbox that does not exist there (kinds/application.ts refuses it at the write, and here it is a 404).
import type { IncomingMessage } from 'node:http';
import { ApiError } from '../errors.js';
import { APPLICATION_PORT, boundSandbox } from '../kinds/application.js';
import { isGone } from '../kinds/status.js';
import type { Admission } from './admission.js';
import type { HostLabelIndex } from '../store/host-labels.js';
import type { Store } from '../store/store.js';
import { sandboxTargetOf, type Targets } from './targets.js';
import { admitDomain } from './custom-domains.js';
import type { WorkloadAddress } from './workload-address.js';

export interface ApplicationResolveDeps {
  store: Store;
  targets: Targets;
  labels: Pick<HostLabelIndex, 'resolve'>;
  /** The replica set's gateway (workloads.ts): an application that runs an image. */
  workloads?: (req: IncomingMessage, a: WorkloadAddress) => Promise<Admission>;
}

export async function admitApplication(
  deps: ApplicationResolveDeps,
  req: IncomingMessage,
  a: WorkloadAddress,
): Promise<Admission> {
  await admitDomain(deps.store, deps.labels, a.domain, a.workspace);
  const o = await deps.store.get({ kind: 'Application', workspace: a.workspace, parent: '', name: a.name });
  const sandbox = o && !isGone(o) ? boundSandbox(o.body.spec) : undefined;
  if (o && sandbox !== undefined) {
    if (o.body.spec?.enabled === false)
      throw new ApiError(
        'UNAVAILABLE',
        `application ${JSON.stringify(a.name)} is deactivated (spec.enabled is false)`,
      );
    const port: number = o.body.spec?.port ?? APPLICATION_PORT;
    return {
      target: await sandboxTargetOf(deps.targets, a.workspace, sandbox),
      path: `/port/${port}${a.rest}`,
    };
  }
  if (!deps.workloads) throw new ApiError('NOT_FOUND', `no route for ${req.url}`);
  return deps.workloads(req, a);
}
