// DELETE /process/{id}/kill: SIGKILL to the process group; status becomes `killed`.
import type { SandboxApi } from '../context.js';
import { sendJson } from '../http.js';
import type { Handler } from '../router.js';
import { processOr404 } from './find.js';

export function killProcess(api: SandboxApi): Handler {
  return ({ res, params }) => {
    const p = processOr404(api, params.id);
    const message = p.kill() ? 'Process killed successfully' : `Process already ${p.status}`;
    sendJson(res, 200, { message });
  };
}
