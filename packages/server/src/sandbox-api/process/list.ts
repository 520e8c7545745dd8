// GET /process: every process started through the API, running or kept after it ended.
import type { SandboxApi } from '../context.js';
import { sendJson } from '../http.js';
import type { Handler } from '../router.js';

export function listProcesses(api: SandboxApi): Handler {
  return ({ res }) =>
    sendJson(
      res,
      200,
      api.processes.list().map((p) => p.toJson()),
    );
}
