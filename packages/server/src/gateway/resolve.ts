// One resolver per kind of address (parse-address.ts): authenticates the caller for the address's workspace and
// finds the table entry to forward to, with the path the workload sees. Kept in one table so a new kind of
// target is an added entry.
import type { IncomingMessage } from 'node:http';
import type { Authenticator } from '../auth/access.js';
import type { HostLabelIndex } from '../store/host-labels.js';
import type { Store } from '../store/store.js';
import { hostHidesNames, routeSandboxLabel } from './address.js';
import { authorize } from './auth.js';
import type { Address, AddressKind } from './parse-address.js';
import { admitPreview, SANDBOX_API_PREVIEW_PORT } from './previews.js';
import type { ForwardExtra } from './proxy.js';
import type { Target, Targets } from './targets.js';

/** A request let in: where it goes, what path the workload sees, and what headers a preview adds. */
export interface Admission {
  target: Target;
  path: string;
  extra?: ForwardExtra;
}

export interface ResolveDeps {
  store: Store;
  targets: Targets;
  /** The address table: host label → the object that holds it (store/host-labels.ts). */
  labels: HostLabelIndex;
  authenticator: Authenticator;
  now: () => number;
}

type Resolver<K extends AddressKind> = (
  a: Extract<Address, { kind: K }>,
  req: IncomingMessage,
  deps: ResolveDeps,
) => Promise<Admission>;

/** The table entry of a sandbox that should serve; the store is asked only off the fast path. Throws 404/503. */
async function targetOf(deps: ResolveDeps, workspace: string, name: string): Promise<Target> {
  const t = deps.targets.get(workspace, name);
  return t?.status === 'DEPLOYED' ? t : deps.targets.resolve(workspace, name);
}

/** `unnamed`: what to call the address in a refusal when it does not show the workspace (auth.ts authorize). */
async function admitSandbox(
  deps: ResolveDeps,
  req: IncomingMessage,
  to: { workspace: string; name: string; rest: string },
  unnamed?: string,
): Promise<Admission> {
  await authorize(deps.authenticator, req.headers, to.workspace, unnamed);
  return { target: await targetOf(deps, to.workspace, to.name), path: to.rest };
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
  const ok = await admitPreview(deps, req, p);
  return {
    target: await targetOf(deps, p.workspace, p.sandbox),
    // A preview of the sandbox API's own port is a session: it reaches the daemon, not a port inside.
    path: ok.port === SANDBOX_API_PREVIEW_PORT ? ok.rest : `/port/${ok.port}${ok.rest}`,
    extra: {
      requestHeaders: ok.requestHeaders,
      responseHeaders: ok.responseHeaders,
      cookieScope: ok.cookieScope,
    },
  };
};

const RESOLVERS: { [K in AddressKind]: Resolver<K> } = {
  sandbox,
  'sandbox-host': sandboxHost,
  preview,
};

export function resolveAddress(a: Address, req: IncomingMessage, deps: ResolveDeps): Promise<Admission> {
  return (RESOLVERS[a.kind] as Resolver<typeof a.kind>)(a as never, req, deps);
}
