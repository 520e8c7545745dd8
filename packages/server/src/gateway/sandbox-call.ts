// A request the server itself makes to a sandbox's API (e.g. a schedule starting its command): it goes the way a
// client's does — the table entry, the activator (which wakes a sandbox in standby and counts the request in) —
// but needs no credential, because it never leaves the process.
import type { Activator } from './activator.js';
import type { Targets } from './targets.js';

/** A JSON call's answer; `statusCode` 0 when the sandbox could not be reached (then `error` says why). */
export interface SandboxCallResult {
  statusCode: number;
  body?: unknown;
  error?: string;
}

/** Longest a server-made call waits for a sandbox's answer: a process start answers at once, well within it. */
export const SANDBOX_CALL_TIMEOUT_MS = 30_000;

export function sandboxCaller(targets: Targets, activator: Activator) {
  return async function call(
    workspace: string,
    name: string,
    method: 'GET' | 'POST',
    path: string,
    json?: unknown,
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
      const res = await t.conn.pool.request({
        path,
        method,
        headers: json === undefined ? {} : { 'content-type': 'application/json' },
        body: json === undefined ? undefined : JSON.stringify(json),
        signal: AbortSignal.timeout(SANDBOX_CALL_TIMEOUT_MS),
      });
      const text = await res.body.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {}
      return { statusCode: res.statusCode, body };
    } catch (err) {
      return {
        statusCode: 0,
        error: `sandbox ${JSON.stringify(name)} did not answer: ${(err as Error).message}`,
      };
    } finally {
      activator.leave(t);
    }
  };
}

export type SandboxCall = ReturnType<typeof sandboxCaller>;
