// Which object a request to the data plane is for, matched once per request: the result travels with the request to
// the resolver of its kind (resolve.ts). A new kind of target is one more member of `Address`, one more matcher
// here (in its place in the order), one more resolver, and one more form in address-forms.ts, without touching the
// others.
import type { IncomingMessage } from 'node:http';
import type { ResourceKey } from '../store/store.js';
import {
  matchPreviewPath,
  matchPreviewPrefixPath,
  matchSandboxHost,
  matchSandboxPath,
  type PreviewAddress,
  RUN_PREFIX,
} from './address.js';
import { matchCustomDomain, matchPreviewDomain } from './custom-domains.js';
import { type JobTriggerAddress, matchJobTrigger } from './job-trigger.js';
import {
  matchTriggerPath,
  matchWorkloadHost,
  matchWorkloadPath,
  type WorkloadAddress,
} from './workload-address.js';

export type Address =
  /** `/run/<ws>/sandboxes/<name>/...`: both names known from the path. */
  | { kind: 'sandbox'; workspace: string; name: string; rest: string }
  /** `sbx-<label>.<region>.<inference_host>`: the label still has to be resolved to (workspace, name). */
  | { kind: 'sandbox-host'; label: string; rest: string }
  | { kind: 'preview'; preview: PreviewAddress }
  /** An agent or function: by its host, its path, or the path of one of its `http` triggers. */
  | { kind: 'workload'; by: 'host' | 'path' | 'trigger-path'; workload: WorkloadAddress }
  /** `POST /run/<ws>/jobs/<name>`: a job's HTTP trigger. */
  | { kind: 'job-trigger'; job: JobTriggerAddress };

export type AddressKind = Address['kind'];

export interface ParseContext {
  inferenceHost?: string;
  /** A preview's own host (a table lookup, previews.ts). */
  previewOfHost: (host: string | undefined, url: string) => PreviewAddress | undefined;
  /** The address table (store/host-labels.ts): hosts and trigger paths to the objects holding them. */
  labels: { resolve(label: string): ResourceKey | undefined };
}

/**
 * The address of a request to the data plane, or undefined for anything else (the API's). Agents and functions
 * first (by host; then an application's or a preview's custom domain by Host; then by path), then jobs' triggers; a preview's own host owns every path on it, then a sandbox's host
 * (any path), then the sandbox and preview paths; last the custom trigger paths, which only take what no other
 * address did, and a preview's `prefixUrl` path after them.
 */
export function parseAddress(req: IncomingMessage, ctx: ParseContext): Address | undefined {
  const url = req.url ?? '/';
  const host = req.headers.host;
  const byHost = matchWorkloadHost(host, url, ctx.inferenceHost, ctx.labels);
  if (byHost) return { kind: 'workload', by: 'host', workload: byHost };
  const byDomain = matchCustomDomain(host, url, ctx.labels);
  if (byDomain) return { kind: 'workload', by: 'host', workload: byDomain };
  const previewByDomain = matchPreviewDomain(host, url, ctx.labels);
  if (previewByDomain) return { kind: 'preview', preview: previewByDomain };
  const byPath = matchWorkloadPath(url);
  if (byPath) return { kind: 'workload', by: 'path', workload: byPath };
  const job = matchJobTrigger(url);
  if (job) return { kind: 'job-trigger', job };
  const byPreviewHost = ctx.previewOfHost(host, url);
  if (byPreviewHost) return { kind: 'preview', preview: byPreviewHost };
  const sandboxHost = ctx.inferenceHost ? matchSandboxHost(host, ctx.inferenceHost) : undefined;
  if (sandboxHost)
    return { kind: 'sandbox-host', label: sandboxHost.label, rest: url.startsWith('/') ? url : `/${url}` };
  if (!url.startsWith(RUN_PREFIX)) return undefined;
  const sandbox = matchSandboxPath(url);
  if (sandbox) return { kind: 'sandbox', ...sandbox };
  const preview = matchPreviewPath(url);
  if (preview) return { kind: 'preview', preview };
  const trigger = matchTriggerPath(url, ctx.labels);
  if (trigger) return { kind: 'workload', by: 'trigger-path', workload: trigger };
  const prefixed = matchPreviewPrefixPath(url, ctx.labels);
  if (prefixed) return { kind: 'preview', preview: prefixed };
  return undefined;
}
