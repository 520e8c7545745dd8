// The HTTP trigger of jobs: `POST /run/<ws>/jobs/<job>` starts an execution when the job has an enabled `http` (or
// `http-async`) trigger; the body's `tasks` (or the trigger's own `configuration.tasks`) are the tasks. Private
// unless the trigger says `authenticationType: public`; answers `{executionId}` at once (the callback reports
// the end).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { atLeast } from '../auth/access.js';
import type { Authenticator } from '../auth/access.js';
import { createExecution } from '../controllers/job/job-create.js';
import type { JobRunner } from '../controllers/job/job-runner.js';
import { ApiError } from '../errors.js';
import { sendProblem } from '../http/problem.js';
import { wireErrorOf } from '../http/wire-error.js';
import type { Resources } from '../store/resources.js';
import { RUN_PREFIX } from './address.js';
import { authorize } from './auth.js';

/** Largest trigger body: task inputs for many tasks, well under what a request should carry. */
export const MAX_TRIGGER_BODY_BYTES = 16 * 1024 * 1024;

export interface JobTriggerAddress {
  workspace: string;
  name: string;
}

/** `/run/<ws>/jobs/<name>` (a query allowed, nothing after the name). */
export function matchJobTrigger(url: string): JobTriggerAddress | undefined {
  if (!url.startsWith(RUN_PREFIX)) return undefined;
  const m = /^([^/?]+)\/jobs\/([^/?]+)\/?(?:\?.*)?$/.exec(url.slice(RUN_PREFIX.length));
  return m ? { workspace: m[1], name: m[2] } : undefined;
}

export interface JobTriggerDeps {
  resources: Resources;
  runner: JobRunner;
  authenticator: Authenticator;
  logger: Logger;
  now?: () => number;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_TRIGGER_BODY_BYTES) {
        reject(
          new ApiError('PAYLOAD_TOO_LARGE', `a trigger body is at most ${MAX_TRIGGER_BODY_BYTES} bytes`),
        );
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function serveJobTrigger(
  deps: JobTriggerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  a: JobTriggerAddress,
): Promise<void> {
  try {
    if (req.method !== 'POST')
      throw new ApiError('METHOD_NOT_ALLOWED', 'POST starts an execution of the job', {
        headers: { allow: 'POST' },
      });
    const j = await deps.resources.store.get({
      kind: 'Job',
      workspace: a.workspace,
      parent: '',
      name: a.name,
    });
    const trigger = (j?.body.spec?.triggers ?? []).find(
      (t: any) => (t.type === 'http' || t.type === 'http-async') && t.enabled !== false,
    );
    if (trigger?.configuration?.authenticationType !== 'public') {
      const access = await authorize(deps.authenticator, req.headers, a.workspace);
      if (!atLeast(access.role, 'member'))
        throw new ApiError('FORBIDDEN', `role ${access.role} cannot start executions (needs member)`);
    }
    if (!j || !trigger) throw new ApiError('NOT_FOUND', `job ${JSON.stringify(a.name)} has no http trigger`);
    const text = await readBody(req);
    let body: any = {};
    try {
      body = text.trim() ? JSON.parse(text) : {};
    } catch {
      throw new ApiError('MALFORMED_REQUEST', 'the body must be JSON: {"tasks": [...]}');
    }
    const request = { ...body, tasks: body?.tasks ?? trigger.configuration?.tasks };
    const { id } = await createExecution(
      { resources: deps.resources, runner: deps.runner, now: deps.now ?? Date.now },
      a.workspace,
      j,
      request,
    );
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ executionId: id, id, jobId: a.name, workspaceId: a.workspace }));
  } catch (err) {
    sendProblem(
      res,
      wireErrorOf(err, { log: deps.logger, what: 'job trigger error' }),
      req.url?.split('?')[0],
    );
  }
}
