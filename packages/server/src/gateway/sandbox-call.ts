// A process the server itself starts in a sandbox (a schedule firing its command): it goes the way a client's
// request does — the table entry, the activator (which wakes a sandbox in standby and counts the call in) — and
// speaks to the daemon through its typed client over the entry's pool, with no credential: it never leaves the
// process.
import { DaemonClient, DaemonError } from '../sandbox-api/client.js';
import type { ProcessRequest } from '../sandbox-api/schema.js';
import type { Activator } from './activator.js';
import type { Targets } from './targets.js';

/** The daemon's answer; `statusCode` 0 when the sandbox could not be reached (then `error` says why). */
export interface SandboxCallResult {
  statusCode: number;
  body?: unknown;
  error?: string;
}

/** Longest a server-made call waits for a sandbox's answer: a process start answers at once, well within it. */
export const SANDBOX_CALL_TIMEOUT_MS = 30_000;

export function processStarter(targets: Targets, activator: Activator) {
  return async function startProcess(
    workspace: string,
    name: string,
    req: ProcessRequest,
  ): Promise<SandboxCallResult> {
    let t: Awaited<ReturnType<Targets['resolve']>>;
    try {
      t = targets.get(workspace, name) ?? (await targets.resolve(workspace, name));
    } catch (err) {
      return {
        statusCode: 0,
        error: `sandbox ${JSON.stringify(name)} is not serving: ${(err as Error).message}`,
      };
    }
    try {
      const wait = activator.enter(t);
      if (wait) await wait;
    } catch (err) {
      return {
        statusCode: 0,
        error: `sandbox ${JSON.stringify(name)} could not be woken: ${(err as Error).message}`,
      };
    }
    try {
      const started = await DaemonClient.over(t.conn.pool).start(
        req,
        AbortSignal.timeout(SANDBOX_CALL_TIMEOUT_MS),
      );
      return { statusCode: 200, body: started };
    } catch (err) {
      if (err instanceof DaemonError) return { statusCode: err.status, body: err.body };
      return {
        statusCode: 0,
        error: `sandbox ${JSON.stringify(name)} did not answer: ${(err as Error).message}`,
      };
    } finally {
      activator.leave(t);
    }
  };
}

export type StartProcess = ReturnType<typeof processStarter>;
