// Where a sandbox (and a preview of one) is served, both ways: its public address from (workspace, name) for
// `metadata.url`, and (workspace, name, rest of the path) from an incoming request's path or Host header
// (DESIGN.md §4).
import { appUrlLabel } from '../kinds/custom-domain.js';
import { createHash } from 'node:crypto';
import { triggerPaths } from '../kinds/trigger-path.js';
import type { ResourceKey } from '../store/store.js';

/** Path prefix of every inference address (run_url). */
export const RUN_PREFIX = '/run/';
const SANDBOXES_SEGMENT = '/sandboxes/';
/** Host label prefix of a sandbox address: `sbx-<sandbox>-<workspace>.<region>.<inference_host>`. */
export const HOST_LABEL_PREFIX = 'sbx-';
const PREVIEWS_SEGMENT = '/previews/';
/**
 * Host label prefix of a preview address: `pv-<id>.<region>.<inference_host>`, id a hash of workspace, sandbox
 * and preview names, so a Host maps to one preview without guessing where names split.
 */
export const PREVIEW_LABEL_PREFIX = 'pv-';

export interface PathTarget {
  workspace: string;
  name: string;
  /** The rest of the URL as received (still percent-encoded), starting with `/`, query included. */
  rest: string;
}

/**
 * `/run/<ws>/sandboxes/<name>[/<rest>][?q]` → its parts; undefined for any other URL. Segments are
 * taken as they are (names are DNS labels, so a percent-encoded one simply matches nothing).
 */
export function matchSandboxPath(url: string): PathTarget | undefined {
  if (!url.startsWith(RUN_PREFIX)) return undefined;
  const wsEnd = url.indexOf('/', RUN_PREFIX.length);
  if (wsEnd < 0 || !url.startsWith(SANDBOXES_SEGMENT, wsEnd)) return undefined;
  const nameStart = wsEnd + SANDBOXES_SEGMENT.length;
  let nameEnd = nameStart;
  while (nameEnd < url.length && url[nameEnd] !== '/' && url[nameEnd] !== '?') nameEnd++;
  if (nameEnd === nameStart) return undefined;
  const tail = url.slice(nameEnd);
  return {
    workspace: url.slice(RUN_PREFIX.length, wsEnd),
    name: url.slice(nameStart, nameEnd),
    rest: tail === '' ? '/' : tail.startsWith('?') ? `/${tail}` : tail,
  };
}

export interface HostTarget {
  /** `<sandbox>-<workspace>` (or its hashed form): looked up whole in the address table, never split. */
  label: string;
  region: string;
}

/** `sbx-<label>.<region>.<inferenceHost>[:port]` → its parts; undefined when the Host is anything else. */
export function matchSandboxHost(
  host: string | undefined,
  inferenceHost: string | undefined,
): HostTarget | undefined {
  return matchLabelHost(host, inferenceHost, HOST_LABEL_PREFIX);
}

/** `<prefix><label>.<region>.<inferenceHost>[:port]` → its parts; undefined when the Host is anything else. */
export function matchLabelHost(
  host: string | undefined,
  inferenceHost: string | undefined,
  prefix: string,
): HostTarget | undefined {
  if (!host || !inferenceHost || host.slice(0, prefix.length).toLowerCase() !== prefix) return undefined;
  const colon = host.lastIndexOf(':');
  const bare = (colon > host.lastIndexOf(']') && colon >= 0 ? host.slice(0, colon) : host).toLowerCase();
  const suffix = `.${inferenceHost.toLowerCase()}`;
  if (!bare.endsWith(suffix)) return undefined;
  const head = bare.slice(prefix.length, bare.length - suffix.length);
  const dot = head.indexOf('.');
  if (dot <= 0 || dot === head.length - 1 || head.indexOf('.', dot + 1) >= 0) return undefined;
  return { label: `${prefix}${head.slice(0, dot)}`, region: head.slice(dot + 1) };
}

/**
 * True when a host label shows none of the names it stands for: a preview's (always a hash) and the hashed form of
 * the others. A refusal at such an address must not name the workspace behind it (gateway/auth.ts authorize).
 */
export const hostHidesNames = (label: string) =>
  label.startsWith(PREVIEW_LABEL_PREFIX) || /^[a-z]+--/.test(label);

/** A DNS label is at most 63 characters (RFC 1035); longer sandbox labels take the hashed form. */
export const MAX_DNS_LABEL = 63;
/**
 * Hex digits of sha256 in the hashed form: 128 bits, so no two objects meet by chance (the table refuses
 * it anyway). `sbx--` can never start a plain label: names never start with `-`.
 */
const LABEL_HASH_HEX = 32;

/**
 * The host label of a sandbox: `sbx-<sandbox>-<workspace>` (the service's own form, which its SDK builds), or
 * `sbx--<hash>` when that would pass 63 characters. Not unique by construction (`app` in `acme-eu` and `app-acme`
 * in `eu` give the same label): uniqueness is the address table's job (store/host-labels.ts).
 */
export function sandboxLabel(workspace: string, name: string): string {
  return prefixedLabel(HOST_LABEL_PREFIX, workspace, name);
}

/** Host label prefixes of agents and functions: `agt-<agent>-<ws>` and `mcp-<function>-<ws>` (the service's). */
export const AGENT_LABEL_PREFIX = 'agt-';
export const FUNCTION_LABEL_PREFIX = 'mcp-';
/** Host label prefix of applications: `app-<application>-<ws>` (decision 054). */
export const APPLICATION_LABEL_PREFIX = 'app-';

/** The kinds served by the replica set (or, for a bound application, by a sandbox): each has its host label. */
export type WorkloadKind = 'Agent' | 'Function' | 'Application';
const LABEL_PREFIX: Record<WorkloadKind, string> = {
  Agent: AGENT_LABEL_PREFIX,
  Function: FUNCTION_LABEL_PREFIX,
  Application: APPLICATION_LABEL_PREFIX,
};
const PATH_SEGMENT: Record<WorkloadKind, string> = {
  Agent: 'agents',
  Function: 'functions',
  Application: 'applications',
};

/** The host label of an agent or function: the sandbox form with the kind's prefix, claimed the same way. */
export function workloadLabel(kind: WorkloadKind, workspace: string, name: string): string {
  return prefixedLabel(LABEL_PREFIX[kind], workspace, name);
}

function prefixedLabel(prefix: string, workspace: string, name: string): string {
  const plain = `${prefix}${name}-${workspace}`;
  if (plain.length <= MAX_DNS_LABEL) return plain;
  const id = createHash('sha256').update(`${workspace}/${name}`).digest('hex').slice(0, LABEL_HASH_HEX);
  return `${prefix}-${id}`;
}

/** Kinds whose objects hold host labels. */
export const LABELED_KINDS = ['Sandbox', 'Preview', 'Agent', 'Function', 'Application'];

/** The address-table label of a custom trigger path: `/<ws>/<path>` (a `/` never appears in a host label). */
export const pathLabel = (workspace: string, path: string) => `/${workspace}/${path}`;

/**
 * The `labelsOf` hook of Resources: the labels an object holds in the address table (other kinds: none). An agent
 * or function also holds the paths of its `http` triggers (kinds/trigger-path.ts), so no two share one.
 */
export function hostLabelsOf(key: ResourceKey, body?: any): string[] {
  if (key.kind === 'Sandbox') return [sandboxLabel(key.workspace, key.name)];
  if (key.kind === 'Preview')
    return [
      previewLabel(key.workspace, key.parent, key.name),
      ...(body?.spec?.customDomain ? [appUrlLabel(body.spec.customDomain)] : []),
      ...(body?.spec?.prefixUrl
        ? [
            prefixedPreviewLabel(key.workspace, body.spec.prefixUrl),
            pathLabel(key.workspace, body.spec.prefixUrl),
          ]
        : []),
    ];
  if (key.kind === 'Agent' || key.kind === 'Function')
    return [
      workloadLabel(key.kind, key.workspace, key.name),
      ...triggerPaths(key.kind, key.name, body?.spec).map((p) => pathLabel(key.workspace, p)),
    ];
  if (key.kind === 'Application')
    return [
      workloadLabel('Application', key.workspace, key.name),
      ...(body?.spec?.urls ?? []).map((u: { domain: string }) => appUrlLabel(u.domain)),
    ];
  return [];
}

/**
 * The sandbox a host label routes to: the table's owner when a sandbox holds it; otherwise a name that exists
 * nowhere, so the request is still asked for a credential before it is told so.
 */
export function routeSandboxLabel(
  table: { resolve(label: string): ResourceKey | undefined },
  label: string,
): { workspace: string; name: string } {
  const owner = table.resolve(label);
  if (owner?.kind === 'Sandbox') return { workspace: owner.workspace, name: owner.name };
  return { workspace: label, name: label };
}

export interface AddressOptions {
  /** The server's public base URL (e.g. `http://127.0.0.1:8080`), read at call time. */
  baseUrl: () => string;
  inferenceHost?: string;
}

/** `metadata.url` of a sandbox: the host form when an inference host is configured, else the path form. */
export function sandboxUrl(o: AddressOptions, workspace: string, name: string, region: string): string {
  const base = o.baseUrl().replace(/\/+$/, '');
  if (!o.inferenceHost) return `${base}${RUN_PREFIX}${workspace}${SANDBOXES_SEGMENT}${name}`;
  const u = new URL(base);
  return `${u.protocol}//${sandboxLabel(workspace, name)}.${region}.${o.inferenceHost}${u.port ? `:${u.port}` : ''}`;
}

/** `metadata.url` of an agent or function: the host form when an inference host is configured, else the path form. */
export function workloadUrl(
  o: AddressOptions,
  kind: WorkloadKind,
  workspace: string,
  name: string,
  region: string,
): string {
  const base = o.baseUrl().replace(/\/+$/, '');
  if (!o.inferenceHost) return `${base}${RUN_PREFIX}${workspace}/${PATH_SEGMENT[kind]}/${name}`;
  const u = new URL(base);
  return `${u.protocol}//${workloadLabel(kind, workspace, name)}.${region}.${o.inferenceHost}${u.port ? `:${u.port}` : ''}`;
}

/** The `urlOf` hook of Resources: fills `metadata.url` of sandboxes and previews (other kinds: undefined). */
export function runUrlOf(o: AddressOptions & { defaultRegion: string }) {
  return (kd: { kind: string }, workspace: string, body: any): string | undefined => {
    if (!body?.metadata?.name) return undefined;
    const region = body.spec?.region ?? o.defaultRegion;
    if (kd.kind === 'Sandbox') return sandboxUrl(o, workspace, body.metadata.name, region);
    if (kd.kind === 'Preview' && body.metadata.resourceName) return previewUrl(o, workspace, body, region);
    // The SDK appends /mcp to a function's address.
    if (kd.kind === 'Agent' || kd.kind === 'Function' || kd.kind === 'Application')
      return workloadUrl(o, kd.kind, workspace, body.metadata.name, region);
    return undefined;
  };
}

export interface PreviewAddress {
  workspace: string;
  sandbox: string;
  preview: string;
  /** The path and query the application sees. */
  rest: string;
  /** Path under which the preview lives on this server ('/' for a host of its own): the cookie's scope. */
  base: string;
  /** The custom domain the request came by (its Host), checked at admission (custom-domains.ts). */
  domain?: string;
  /** Reached by its `prefixUrl` path, which shows none of its names: a refusal names none either. */
  prefixed?: boolean;
}

/**
 * `/run/<ws>/<prefix>[/<rest>][?q]` → the preview holding that `prefixUrl` in the address table; undefined when
 * none does. Asked after the custom trigger paths, which take the longer paths they hold.
 */
export function matchPreviewPrefixPath(
  url: string,
  labels: { resolve(label: string): ResourceKey | undefined },
): PreviewAddress | undefined {
  const m = /^\/run\/([^/?]+)\/([^/?]+)(.*)$/.exec(url);
  if (!m) return undefined;
  const owner = labels.resolve(pathLabel(m[1], m[2]));
  if (owner?.kind !== 'Preview' || owner.workspace !== m[1]) return undefined;
  const tail = m[3];
  return {
    workspace: owner.workspace,
    sandbox: owner.parent,
    preview: owner.name,
    rest: tail === '' ? '/' : tail.startsWith('?') ? `/${tail}` : tail,
    base: `${RUN_PREFIX}${m[1]}/${m[2]}/`,
    prefixed: true,
  };
}

/** `/run/<ws>/previews/<sandbox>/<preview>[/<rest>][?q]` → its parts; undefined for any other URL. */
export function matchPreviewPath(url: string): PreviewAddress | undefined {
  if (!url.startsWith(RUN_PREFIX)) return undefined;
  const m = /^\/run\/([^/?]+)\/previews\/([^/?]+)\/([^/?]+)(.*)$/.exec(url);
  if (!m) return undefined;
  const tail = m[4];
  return {
    workspace: m[1],
    sandbox: m[2],
    preview: m[3],
    rest: tail === '' ? '/' : tail.startsWith('?') ? `/${tail}` : tail,
    base: `${RUN_PREFIX}${m[1]}${PREVIEWS_SEGMENT}${m[2]}/${m[3]}/`,
  };
}

export function previewLabel(workspace: string, sandbox: string, preview: string): string {
  const id = createHash('sha256').update(`${workspace}/${sandbox}/${preview}`).digest('hex').slice(0, 20);
  return `${PREVIEW_LABEL_PREFIX}${id}`;
}

/**
 * The host label of a preview with a `prefixUrl` (decision 085): `pv-<prefix>-<workspace>`, the prefix first as
 * the service puts it. Not unique by construction (`a` in `b-c` and `a-b` in `c` meet): the address table is.
 */
export const prefixedPreviewLabel = (workspace: string, prefix: string) =>
  `${PREVIEW_LABEL_PREFIX}${prefix}-${workspace}`;

/**
 * `metadata.url` of a preview: the host form when an inference host is configured, else the path form. With a
 * `prefixUrl` the address carries it: `pv-<prefix>-<ws>.<region>.<inference_host>`, or `{run}/<ws>/<prefix>`.
 */
export function previewUrl(o: AddressOptions, workspace: string, body: any, region: string): string {
  const sandbox = body.metadata.resourceName;
  const name = body.metadata.name;
  const base = o.baseUrl().replace(/\/+$/, '');
  const prefix: string | undefined = body.spec?.prefixUrl;
  if (prefix) {
    if (!o.inferenceHost) return `${base}${RUN_PREFIX}${workspace}/${prefix}`;
    const u = new URL(base);
    return `${u.protocol}//${prefixedPreviewLabel(workspace, prefix)}.${region}.${o.inferenceHost}${u.port ? `:${u.port}` : ''}`;
  }
  if (!o.inferenceHost) return `${base}${RUN_PREFIX}${workspace}${PREVIEWS_SEGMENT}${sandbox}/${name}`;
  const u = new URL(base);
  return `${u.protocol}//${previewLabel(workspace, sandbox, name)}.${region}.${o.inferenceHost}${u.port ? `:${u.port}` : ''}`;
}
