// What the CLI knows of itself and of its server: its own version (package.json) and the server's
// `GET /healthz` answer `{status, version}`, used by `berth --version` and `berth status`.
import { readFileSync } from 'node:fs';
import type { CliConfig } from './config.js';
import { serverBase } from './sandbox-client.js';

/** A reachable server answers /healthz within milliseconds; past this the CLI reports it unreachable. */
export const HEALTH_TIMEOUT_MS = 5_000;

/** src/ and dist/ both sit one folder below the package's package.json. */
export const CLI_VERSION: string = (() => {
  try {
    return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
})();

export interface ServerHealth {
  url: string;
  status: string;
  version: string;
}

/** The server's health and version; throws a one-line reason when it cannot be reached. */
export async function serverHealth(cfg: Pick<CliConfig, 'url'>): Promise<ServerHealth> {
  const url = serverBase(cfg);
  let res: Response;
  try {
    res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
  } catch (e) {
    const err = e as Error & { cause?: Error };
    throw new Error(`cannot reach ${url}: ${err.cause?.message ?? err.message}`);
  }
  if (!res.ok) throw new Error(`${url}/healthz answered HTTP ${res.status}`);
  const body = (await res.json().catch(() => ({}))) as { status?: string; version?: string };
  return { url, status: body.status ?? 'unknown', version: body.version ?? 'unknown' };
}
