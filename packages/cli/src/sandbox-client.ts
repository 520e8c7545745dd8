// How the CLI reaches one sandbox's own API: through the server's gateway at the path form of its address
// (`<server>/run/<ws>/sandboxes/<name>`), which works wherever /v0 does, with or without wildcard DNS.
import type { ErrorResponse } from '@berth/server/sandbox-api/schema.js';
import { Api, itemPath } from './client.js';
import type { CliConfig } from './config.js';

export interface SandboxHandle {
  name: string;
  workspace: string;
  /** Base URL of the sandbox API, no trailing slash. */
  url: string;
  headers: Record<string, string>;
}

export function serverBase(cfg: Pick<CliConfig, 'url'>): string {
  return cfg.url.replace(/\/+$/, '').replace(/\/v0$/, '');
}

export async function openSandbox(cfg: CliConfig, name: string): Promise<SandboxHandle> {
  const { body } = await new Api(cfg).call('GET', itemPath('/sandboxes', name));
  const workspace: string = body?.metadata?.workspace ?? cfg.workspace ?? 'default';
  return {
    name,
    workspace,
    url: `${serverBase(cfg)}/run/${encodeURIComponent(workspace)}/sandboxes/${encodeURIComponent(name)}`,
    headers: { authorization: `Bearer ${cfg.apiKey}` },
  };
}

/** The message of a failed sandbox API call: its `{"error"}` body, a problem's detail, or the status. */
export async function failure(res: Response, what: string): Promise<Error> {
  const text = await res.text();
  let detail = text.slice(0, 500);
  try {
    // The daemon's own error shape; anything else falls back to `detail` or the text.
    const j = JSON.parse(text) as Partial<ErrorResponse> & { detail?: string };
    detail = j.error ?? j.detail ?? detail;
  } catch {}
  return new Error(`${what} failed (HTTP ${res.status}): ${detail}`);
}

/** `/tmp/a b.txt` → `%2Ftmp%2Fa%20b.txt`: the sandbox API takes the whole path as one encoded segment. */
export const encodePath = (p: string) => encodeURIComponent(p);
