// What a job execution's task credential may do: read its own execution (GET the execution, its tasks and its
// tasks' logs) and nothing else — no other execution, no other route of the API, no gateway (decision 033).
import type { ExecutionScope, Route } from './access.js';

export const SCOPED_ONLY = "this credential is a job task's: it can only read its own execution";

const READ = new Set(['GET', 'HEAD']);

export function scopeAllows(scope: ExecutionScope, route: Route): boolean {
  if (!READ.has(route.method.toUpperCase())) return false;
  let parts: string[];
  try {
    parts = route.path.split('/').map(decodeURIComponent);
  } catch {
    return false;
  }
  // '', 'v0', 'jobs', <job>, 'executions', <id>, then nothing, 'tasks', or 'tasks', <index>, 'logs'.
  const [empty, v0, jobs, job, executions, id, ...rest] = parts;
  if (empty !== '' || v0 !== 'v0' || jobs !== 'jobs' || executions !== 'executions') return false;
  if (job !== scope.job || id !== scope.execution) return false;
  if (rest.length === 0) return true;
  if (rest.length === 1) return rest[0] === 'tasks';
  return rest.length === 3 && rest[0] === 'tasks' && /^\d+$/.test(rest[1]) && rest[2] === 'logs';
}
