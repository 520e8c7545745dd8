// GET /process/{id}: one process by id, OS pid or name.
import type { SandboxApi } from '../context.js';
import { sendJson } from '../http.js';
import type { Handler } from '../router.js';
import { processOr404 } from './find.js';

export function getProcess(api: SandboxApi): Handler {
  return ({ res, params }) => sendJson(res, 200, processOr404(api, params.id).toJson());
}
