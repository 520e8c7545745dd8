// POST /process/{id}/stdin writes the raw body to a process started with `stdin: true`; DELETE closes it (EOF).
import type { SandboxApi } from '../context.js';
import { conflict, readBody, sendJson } from '../http.js';
import type { Handler } from '../router.js';
import { processOr404 } from './find.js';

/** One write to stdin at most (an MCP stdio message is far smaller). */
export const STDIN_BODY_LIMIT = 16 * 1024 * 1024;

export function writeStdin(api: SandboxApi): Handler {
  return async ({ req, res, params }) => {
    const p = processOr404(api, params.id);
    const data = await readBody(req, STDIN_BODY_LIMIT);
    if (!(await p.writeStdin(data))) {
      throw conflict(
        `process ${params.id} has no open stdin (start it with stdin: true; it must be running)`,
      );
    }
    sendJson(res, 200, { message: `Wrote ${data.length} bytes to stdin` });
  };
}

export function closeStdin(api: SandboxApi): Handler {
  return ({ res, params }) => {
    processOr404(api, params.id).closeStdin();
    sendJson(res, 200, { message: 'Stdin closed' });
  };
}
