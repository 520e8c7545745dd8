// One resolver per kind of address (parse-address.ts): authenticates the caller for the address's workspace and
// finds what to forward to, with the path the instance sees (admission.ts), or answers the request itself. Kept in
// one table so a new kind of target is an added entry.
import type { IncomingMessage } from 'node:http';
import type { Authenticator } from '../auth/access.js';
import { ApiError } from '../errors.js';
import type { HostLabelIndex } from '../store/host-labels.js';
import type { Store } from '../store/store.js';
import { hostHidesNames, routeSandboxLabel } from './address.js';
import type { Admission, Forwarded } from './admission.js';
import { admitApplication } from './applications.js';
import { admitDomain } from './custom-domains.js';
import { authorize } from './auth.js';
import type { JobTriggerAddress } from './job-trigger.js';
import type { Address, AddressKind } from './parse-address.js';
import { admitPreview, SANDBOX_API_PREVIEW_PORT } from './previews.js';
import { sandboxTargetOf, type Targets } from './targets.js';
import type { WorkloadAddress } from './workload-address.js';

export interface ResolveDeps {
  store: Store;
  targets: Targets;
  /** The address table: host label → the object that holds it (store/host-labels.ts). */
  labels: HostLabelIndex;
  authenticator: Authenticator;
  now: () => number;
  /** Agents and functions (workloads.ts); none: their addresses are the API's (404). */
  workloads?: (req: IncomingMessage, a: WorkloadAddress) => Promise<Admission>;
  /** Jobs' HTTP triggers (job-trigger.ts), answered by the gateway itself. */
  jobTrigger?: (req: IncomingMessage, a: JobTriggerAddress) => Admission;
}

type Resolver<K extends AddressKind> = (
  a: Extract<Address, { kind: K }>,
  req: IncomingMessage,
  deps: ResolveDeps,
) => Promise<Admission>;

/** `unnamed`: what to call the address in a refusal when it does not show the workspace (auth.ts authorize). */
async function admitSandbox(
  deps: ResolveDeps,
  req: IncomingMessage,
  to: { workspace: string; name: string; rest: string },
  unnamed?: string,
): Promise<Forwarded> {
  await authorize(deps.authenticator, req.headers, to.workspace, unnamed);
  return { target: await sandboxTargetOf(deps.targets, to.workspace, to.name), path: to.rest };
}

const sandbox: Resolver<'sandbox'> = (a, req, deps) => admitSandbox(deps, req, a);

/**
 * `sbx-<label>` → (workspace, name): an exact lookup of the whole label in the address table, never a split at
 * `-` (docs/decisions/016-addresses-and-tenancy.md). An unknown label still asks for a credential before the 404.
 */
const sandboxHost: Resolver<'sandbox-host'> = (a, req, deps) =>
  admitSandbox(
    deps,
    req,
    { ...routeSandboxLabel(deps.labels, a.label), rest: a.rest },
    hostHidesNames(a.label) ? `address ${a.label}` : undefined,
  );

const preview: Resolver<'preview'> = async (a, req, deps) => {
  const p = a.preview;
  await admitDomain(deps.store, deps.labels, p.domain, p.workspace);
  const ok = await admitPreview(deps, req, p);
  return {
    target: await sandboxTargetOf(deps.targets, p.workspace, p.sandbox),
    // A preview of the sandbox API's own port is a session: it reaches the daemon, not a port inside.
    path: ok.port === SANDBOX_API_PREVIEW_PORT ? ok.rest : `/port/${ok.port}${ok.rest}`,
    extra: {
      requestHeaders: ok.requestHeaders,
      responseHeaders: ok.responseHeaders,
      cookieScope: ok.cookieScope,
    },
  };
};

const workload: Resolver<'workload'> = async (a, req, deps) => {
  if (a.workload.kind === 'Application') return admitApplication(deps, req, a.workload);
  if (!deps.workloads) throw new ApiError('NOT_FOUND', `no route for ${req.url}`);
  return deps.workloads(req, a.workload);
};

const jobTrigger: Resolver<'job-trigger'> = async (a, req, deps) => {
  if (!deps.jobTrigger) throw new ApiError('NOT_FOUND', `no route for ${req.url}`);
  return deps.jobTrigger(req, a.job);
};

const RESOLVERS: { [K in AddressKind]: Resolver<K> } = {
  sandbox,
  'sandbox-host': sandboxHost,
  preview,
  workload,
  'job-trigger': jobTrigger,
};

export function resolveAddress(a: Address, req: IncomingMessage, deps: ResolveDeps): Promise<Admission> {
  return (RESOLVERS[a.kind] as Resolver<typeof a.kind>)(a as never, req, deps);
}
