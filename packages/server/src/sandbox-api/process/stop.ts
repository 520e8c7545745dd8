// DELETE /process/{id}: SIGTERM to the process group (SIGKILL after a grace period); status becomes `stopped`.
import type { SandboxApi } from '../context.js';
import { sendJson } from '../http.js';
import type { Handler } from '../router.js';
import { processOr404 } from './find.js';

export function stopProcess(api: SandboxApi): Handler {
  return ({ res, params }) => {
    const p = processOr404(api, params.id);
    // Ending an already ended process is not an error: cleanup code calls this without knowing.
    const message = p.stop() ? 'Process stopped successfully' : `Process already ${p.status}`;
    sendJson(res, 200, { message });
  };
}
