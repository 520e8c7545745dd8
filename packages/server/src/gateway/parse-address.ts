// Which workload a request addresses, matched once per request: the result travels with the request to the
// resolver of its kind (resolve.ts). A new kind of target (an agent at `/run/<ws>/agents/<name>`, a function at
// `/run/<ws>/functions/<name>`) is one more member of `Address`, one more matcher here and one more resolver,
// without touching the sandbox paths.
import type { IncomingMessage } from 'node:http';
import {
  matchPreviewPath,
  matchSandboxHost,
  matchSandboxPath,
  type PreviewAddress,
  RUN_PREFIX,
} from './address.js';

export type Address =
  /** `/run/<ws>/sandboxes/<name>/...`: both names known from the path. */
  | { kind: 'sandbox'; workspace: string; name: string; rest: string }
  /** `sbx-<label>.<region>.<inference_host>`: the label still has to be resolved to (workspace, name). */
  | { kind: 'sandbox-host'; label: string; rest: string }
  | { kind: 'preview'; preview: PreviewAddress };

export type AddressKind = Address['kind'];

export interface ParseContext {
  inferenceHost?: string;
  /** A preview's own host (a table lookup, previews.ts). */
  previewOfHost: (host: string | undefined, url: string) => PreviewAddress | undefined;
}

/**
 * The address of a request to the data plane, or undefined for anything else (the API's). A preview's own host
 * owns every path on it; then a sandbox's host (any path); then the /run paths.
 */
export function parseAddress(req: IncomingMessage, ctx: ParseContext): Address | undefined {
  const url = req.url ?? '/';
  const host = req.headers.host;
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
  return undefined;
}
