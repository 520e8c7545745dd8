// GET /process/{id}/logs: the kept output, interleaved and per stream.
import type { SandboxApi } from '../context.js';
import { sendJson } from '../http.js';
import type { Handler } from '../router.js';
import type { ProcessLogs } from '../schema.js';
import { processOr404 } from './find.js';

export function processLogs(api: SandboxApi): Handler {
  return ({ res, params }) => {
    const { logs } = processOr404(api, params.id);
    const body: ProcessLogs = { logs: logs.text(), stdout: logs.text('stdout'), stderr: logs.text('stderr') };
    sendJson(res, 200, body);
  };
}
