// Looks a process up by the `:id` route parameter (id, OS pid or name), 404 when unknown.
import type { SandboxApi } from '../context.js';
import { notFound } from '../http.js';
import type { ManagedProcess } from './managed-process.js';

export function processOr404(api: SandboxApi, identifier: string): ManagedProcess {
  const p = api.processes.find(identifier);
  if (!p) throw notFound(`process ${identifier} not found`);
  return p;
}
